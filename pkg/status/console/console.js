// XLB admin console: polls the status API every second and renders it.
// Only textContent is used, so names from discovery are never parsed as HTML.
// Rates are computed here, between two documents with different data-path
// samples (the counters only move when a sample is taken, so the time
// between the samples is the divisor, not the time between fetches).
// Services (DESIGN §9) have a table of their own, and the backends table
// is grouped by service; the header's selector shows one service alone.
"use strict";

const API = new URL("../api/v1/status", document.baseURI);

function $(id) { return document.getElementById(id); }

// el makes an element with text, an optional class and an optional
// data-field (the document's field it shows; the lab test reads it).
function el(tag, text, cls, field) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  if (field) e.dataset.field = field;
  return e;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? Math.round(n) + " B" : n.toFixed(1) + " " + units[i];
}

// perSecond formats an event rate: one decimal below 10, "—" when unknown.
function perSecond(r) {
  if (r === null) return "—";
  return r < 10 && r !== Math.floor(r) ? r.toFixed(1) : r.toFixed(0);
}

function byteRate(r) { return r === null ? "—" : bytes(r) + "/s"; }

function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return d + "d " + h + "h " + m + "m";
  if (h) return h + "h " + m + "m " + (s % 60) + "s";
  if (m) return m + "m " + (s % 60) + "s";
  return s + "s";
}

// fill writes [label, value, field] rows into a definition list.
function fill(dl, rows) {
  dl.replaceChildren();
  for (const [k, v, field] of rows) { dl.append(el("dt", k), el("dd", v, "", field)); }
}

function badge(e, text, cls) { e.textContent = text; e.className = "badge " + cls; }

// The state names come from the document (pkg/status/api: Lifecycles and
// BackendStates); this table only gives each its CSS class. A name not
// listed here shows as "bad".
const STATE_CLASS = {
  starting: "warn", running: "ok", handing_over: "warn", shutting_down: "warn",
  routable: "ok", unhealthy: "bad", draining: "warn", unreachable: "bad",
  serving: "ok",
};

function stateClass(name) { return STATE_CLASS[name] || "bad"; }

// REFUSED are the data path's counters of SYNs it refused or dropped
// (dataplane.counters, pkg/status/api Counters) and what each means.
const REFUSED = [
  ["snat_port_exhausted_total", "no free SNAT port"],
  ["table_full_total", "flow table full"],
  ["no_backend_total", "no routable backend"],
  ["fib_miss_total", "next hop unresolved"],
];

// VERDICTS are the XDP actions the data path counts
// (dataplane.counters.xdp_actions).
const VERDICTS = [
  ["tx", "tx (balanced, sent back out)"], ["redirect", "redirect (balanced, another interface)"],
  ["pass", "pass (to the kernel)"], ["drop", "drop"], ["aborted", "aborted (program error)"],
];

// Rates: a per-second view of two documents, prev with an earlier sample
// than cur; null (every rate unknown) without two samples.
function ratesBetween(prev, cur) {
  const a = prev && prev.dataplane.sampled_at_unix_ms, b = cur.dataplane.sampled_at_unix_ms;
  if (a === null || a === undefined || b === null || b <= a) return null;
  const dt = (b - a) / 1000;
  // Backend ids (member ids) are unique across services.
  const before = new Map(allBackends(prev).map(x => [x.id, x]));
  return {
    seconds: dt,
    // per is the rate of a counter read as f(document); null after a reset.
    per: f => (f(cur) >= f(prev) ? (f(cur) - f(prev)) / dt : null),
    // backend is the rate of a backend counter; null for a new backend or
    // a reused id.
    backend: (x, f) => {
      const p = before.get(x.id);
      return p && p.ip === x.ip && f(x) >= f(p) ? (f(x) - f(p)) / dt : null;
    },
  };
}

// allBackends are every service's backends.
function allBackends(d) { return (d.services || []).flatMap(s => s.backends); }

// shown are the services the selector lets through: every one, or the
// selected one.
function shown(d) {
  const want = $("service").value;
  return (d.services || []).filter(s => !want || s.name === want);
}

// listenText is a service's address, protocol and port mappings.
function listenText(s) {
  const ports = s.listen.ports.map(p => p.local_port + "→" + (p.remote_port || "each backend's port")).join(", ");
  return s.listen.ip + " " + s.proto + "  " + ports;
}

// serviceCounts are a service's columns: its connections, or a UDP
// service's pairs (issue 31: time-wait none, closed its expired pairs).
function serviceCounts(s) {
  const u = s.udp;
  if (!u) {
    const c = s.connections;
    return { active: c.active, timewait: c.timewait, opened: c.opened_total, closed: c.closed_total };
  }
  return { active: u.active, timewait: "—", opened: u.opened_total,
    closed: u.expired_total.unreplied + u.expired_total.replied };
}

// udpText is a UDP service's pairs in a few words: "812 pairs (40
// unreplied, cap 65536)"; "" for a TCP service.
function udpText(s) {
  const u = s.udp;
  return u ? u.active + " pairs (" + u.unreplied + " unreplied, cap " + u.unreplied_max + ")" : "";
}

// backendCounts are a backend's active and opened: connections, or UDP
// pairs in a UDP service.
function backendCounts(b) {
  return b.udp ? { active: b.udp.pairs_active, timewait: "—", opened: b.udp.opened_total }
    : { active: b.active_connections, timewait: b.timewait_connections, opened: b.opened_total };
}

// schedulerText is a service's scheduler with its Maglev hash and table
// (issue 30): "maglev: client_ip, 16381 slots, 4 rebuilds".
function schedulerText(s) {
  const parts = [];
  if (s.maglev) parts.push(s.maglev.hash);
  if (s.table) {
    parts.push(s.table.size ? s.table.size + " slots, " + s.table.rebuilds_total + " rebuilds" : "no table yet");
    if (s.table.overfull) parts.push("OVERFULL: under 100 slots per routable backend");
  }
  return (s.scheduler || "round_robin") + (parts.length ? ": " + parts.join(", ") : "");
}

// syncSelector lists the document's services in the selector and keeps
// the selection while the service exists.
function syncSelector(d) {
  const sel = $("service"), want = sel.value;
  const names = (d.services || []).map(s => s.name);
  const have = [...sel.options].slice(1).map(o => o.value);
  if (names.join("\n") !== have.join("\n")) {
    sel.replaceChildren(el("option", "all"));
    sel.options[0].value = "";
    for (const n of names) { const o = el("option", n); o.value = n; sel.append(o); }
  }
  sel.value = names.includes(want) ? want : "";
}

// A missing rate view answers null everywhere.
const NO_RATES = { seconds: 0, per: () => null, backend: () => null };

// healthText is a backend's active health checks: "-" without checks,
// "pending" before the first, else the last result, its error, its age
// and the results so far.
function healthText(h) {
  if (!h) return "-";
  if (!h.last_result) return "pending";
  const age = Math.max(0, Math.round((Date.now() - h.last_check_unix_ms) / 1000));
  return h.last_result + (h.last_error ? ": " + h.last_error : "") + " (" + age + " s ago; " +
    h.checks_ok_total + " ok, " + h.checks_failed_total + " failed)";
}

function renderInstance(d) {
  const dp = d.dataplane;
  const xdp = dp.xdp_attachments.map(a => a.interface + " (" + a.mode + ")").join(", ") || "none";
  const cfg = d.config.missing ? "file missing" : d.config.invalid ? "file invalid: " + d.config.invalid
    : d.config.reload_required ? "reload required (systemctl reload xlb): " + d.config.changed_keys.join(", ") : "up to date";
  const up = d.upgrades;
  const started = !up.start ? "—" : up.start === "fresh" ? "fresh"
    : up.start + " with " + up.adopted_pairs + " connection pairs";
  const upgrades = up.ok + " ok, " + up.failed + " failed" + (up.last_failure ? " — last: " + up.last_failure : "");
  const bgp = !d.bgp ? "off" : d.bgp.peers.filter(p => p.state === "established").length + "/" + d.bgp.peers.length
    + " peers established; " + (d.bgp.announced.length ? "announcing " + d.bgp.announced.join(", ") : "announcing nothing");
  const m = d.maintenance;
  const rows = [
    ["Uptime", duration(d.uptime_seconds)],
    ["Services", (d.services || []).map(s => s.name + " (" + listenText(s).trim() + ")").join("; ") || "none yet"],
    ["SNAT", ((d.snat.ips || []).join(", ") || d.snat.ip || "—")
      + ((d.snat.retired || []).length ? "; retired, still held by connections: "
        + d.snat.retired.map(r => r.ip + " " + r.port_range).join(", ") : "")],
    ["XDP", xdp],
    ["BGP", bgp],
    ["Drained", !d.drained ? "no" : "yes" + (d.drain && d.drain.since_unix_ms
        ? " since " + new Date(d.drain.since_unix_ms).toISOString().replace(/\.\d+Z$/, "Z") : "")
      + (d.drain && d.drain.by ? " by " + d.drain.by : "")
      + (d.drain && d.drain.restored ? ", kept from a previous process" : "")
      + ": readiness answers draining; every packet is still forwarded"],
    ["Sample age", dp.sample_age_ms === null ? "no sample yet" : dp.sample_age_ms + " ms (cycle " + dp.sample_cycle + ")"],
    ["Maintenance", m.failing ? "FAILING " + m.consecutive_failures + " cycles in a row (figures from the last good one): " + m.last_error : "ok"],
    ["Config", cfg],
    ["Started", started],
    ["Hot upgrades", upgrades],
  ];
  const reset = (d.host_settings || []).filter(h => h.repairs_total > 0)
    .map(h => h.name + " put back " + h.repairs_total + "×").join(", ");
  if (d.host_settings && d.host_settings.length) rows.push(["Sysctls", reset || "guarded, never reset"]);
  const unpinned = dp.features.find(f => f.path === "unpinned");
  if (unpinned) rows.push(["Pinned state", "none: a restart or crash loses every connection (" + unpinned.detail + ")"]);
  if (d.shutdown) rows.unshift(["Shutdown", d.shutdown.resets_from_unix_ms > d.generated_at_unix_ms
    ? "routes withdrawn, forwarding as before; resets begin in "
      + Math.ceil((d.shutdown.resets_from_unix_ms - d.generated_at_unix_ms) / 1000) + " s"
    : d.shutdown.seconds_left + " s left"]);
  fill($("instance"), rows);
}

function renderRates(d, r) {
  const sum = f => allBackends(d).reduce((s, x) => s + (r.backend(x, f) || 0), 0);
  const known = r !== NO_RATES;
  fill($("rates"), [
    ["New connections", perSecond(r.per(x => x.connections.opened_total)) + " /s", "rate_opened"],
    ["Closed", perSecond(r.per(x => x.connections.closed_total)) + " /s"],
    ["Sent (to backends)", known ? byteRate(sum(x => x.sent_bytes_total)) : "—", "rate_sent_bytes"],
    ["Received (from backends)", known ? byteRate(sum(x => x.received_bytes_total)) : "—", "rate_received_bytes"],
    ["Refused SYNs", perSecond(r.per(x => REFUSED.reduce((s, [k]) => s + x.dataplane.counters[k], 0))) + " /s"],
    ["Over", known ? r.seconds.toFixed(1) + " s between samples" : "waiting for a second sample"],
  ]);
}

function renderConnections(d) {
  const c = d.connections, dp = d.dataplane, fm = dp.flow_map, k = dp.counters;
  const pct = fm.capacity ? (100 * fm.entries / fm.capacity).toFixed(1) + "%" : "—";
  fill($("connections"), [
    ["Active", c.active, "active"], ["Time-wait", c.timewait, "timewait"], ["Opened", c.opened_total, "opened_total"],
    ["Closed", c.closed_total + " (client FIN " + c.closed_by.client_fin + ", backend FIN " + c.closed_by.backend_fin +
      ", client RST " + c.closed_by.client_rst + ", backend RST " + c.closed_by.backend_rst + ")"],
    ["Orphaned", c.orphaned_total],
    ["Embryonic expired", c.embryonic_expired_total],
    ...udpRows(d),
    ["Flow map", fm.entries + " / " + fm.capacity + " entries (" + pct + ")"],
    ["SNAT ports", "taken over " + k.snat_takeovers_total + ", reused from TIME_WAIT " + k.snat_timewait_reuses_total +
      ", fallbacks " + k.snat_fallbacks_total +
      ", held-port drops " + k.hold_drops_total],
    ["Dropped", "out-of-window RSTs " + k.rst_out_of_window_total + ", TTL ≤ 1 " + k.ttl_exceeded_total],
    ["Inexact RSTs", k.rst_inexact_total + " (in the window, not exact: forwarded, the pair kept)"],
    ["ICMP translated", "to clients " + k.icmp_to_client_total + ", to backends " + k.icmp_to_backend_total],
    ["Not ours", k.not_ours_total + " (frames for another host's MAC, passed to the kernel)"],
    ["IPv4 fragments", "forwarded " + k.fragments_forwarded_total + ", passed " + k.fragments_passed_total +
      " (of no known pair or datagram)"],
    ["IPv4 options", "forwarded " + k.ip_options_forwarded_total],
  ]);
}

// udpRows are the instance's UDP pairs (issue 31), shown once a UDP
// service or a UDP count exists.
function udpRows(d) {
  const u = d.udp_pairs;
  if (!u || (!(d.services || []).some(s => s.udp) && !u.opened_total)) return [];
  return [
    ["UDP pairs", u.active + " (" + u.unreplied + " unreplied), opened " + u.opened_total + ", expired " +
      (u.expired_total.unreplied + u.expired_total.replied) + " (" + u.expired_total.unreplied + " unreplied), over cap " +
      u.over_cap_total, "udp_pairs"],
    ["UDP passed", "no backend " + u.no_backend_total + ", fragments " + u.fragments_passed_total],
  ];
}

// renderCounts fills a table body with [key, label] rows of counters read
// by value(document, key), with their rates; alarm marks counts above 0.
function renderCounts(tbody, list, d, r, value, alarm) {
  tbody.replaceChildren();
  for (const [key, label] of list) {
    const n = value(d, key);
    const tr = el("tr");
    tr.append(el("td", label, "label"), el("td", n, alarm && n > 0 ? "n nonzero" : "n", key),
      el("td", perSecond(r.per(x => value(x, key))), "n"));
    tbody.append(tr);
  }
}

// providerText is a service's backend provider and its health.
function providerText(p) {
  return p.name + (p.healthy ? "" : " — " + p.error) +
    (p.stale ? " — stale: serving the previous xlb's routable set until it syncs" : "");
}

function renderServices(d, r) {
  const tb = $("services");
  tb.replaceChildren();
  const prevOf = name => (x => { const p = (x.services || []).find(s => s.name === name); return p ? serviceCounts(p).opened : NaN; });
  for (const s of shown(d)) {
    const c = serviceCounts(s), n = {};
    for (const b of s.backends) n[b.state] = (n[b.state] || 0) + 1;
    const tr = el("tr");
    tr.dataset.service = s.name;
    const ready = s.state === "draining" ? "— (removed by a reload)" : s.readiness.ready ? "ready" : "not ready: " + s.readiness.reason;
    const opened = r.per(prevOf(s.name));
    tr.append(el("td", s.name, "", "name"), el("td", s.state, stateClass(s.state), "state"),
      el("td", ready, s.readiness.ready || s.state === "draining" ? "" : "bad", "readiness"),
      el("td", listenText(s) + (s.udp ? " · " + udpText(s) : "")), el("td", c.active, "n", "active"), el("td", c.timewait, "n"),
      el("td", c.opened, "n", "opened_total"), el("td", perSecond(Number.isNaN(opened) ? null : opened), "n"),
      el("td", c.closed, "n"),
      el("td", Object.entries(n).map(([k, v]) => v + " " + k).join(", ") || "none"),
      el("td", providerText(s.provider), s.provider.healthy ? "" : "bad"));
    tb.append(tr);
  }
}

// renderBackends fills the backends table, one group of rows per service
// under a header row.
function renderBackends(d, r) {
  const tb = $("backends");
  tb.replaceChildren();
  for (const s of shown(d)) {
    const head = el("tr", undefined, "service");
    const th = el("th", "Service " + s.name + " (" + s.state + "): " + listenText(s) + " (" + schedulerText(s) + ")" +
      (s.udp ? " · " + udpText(s) : ""));
    th.colSpan = 16;
    head.append(th);
    tb.append(head);
    for (const b of s.backends) {
      const c = backendCounts(b);
      const tr = el("tr");
      tr.dataset.backend = b.name;
      tr.dataset.service = s.name;
      tr.append(el("td", b.name, "", "name"), el("td", b.ip, "", "ip"), el("td", b.state, stateClass(b.state), "state"),
        el("td", b.available_for_new_connections ? "yes" : "no"),
        el("td", b.weight, "n", "weight"), el("td", (100 * (b.table_share || 0)).toFixed(1) + "%", "n", "table_share"),
        el("td", c.active, "n", "active_connections"), el("td", c.timewait, "n"),
        el("td", c.opened, "n", "opened_total"), el("td", perSecond(r.backend(b, x => backendCounts(x).opened)), "n"),
        el("td", bytes(b.sent_bytes_total), "n"), el("td", byteRate(r.backend(b, x => x.sent_bytes_total)), "n"),
        el("td", bytes(b.received_bytes_total), "n"), el("td", byteRate(r.backend(b, x => x.received_bytes_total)), "n"),
        el("td", healthText(b.health), "health" + (b.health && b.health.last_result === "fail" ? " bad" : ""), "health"),
        el("td", b.reason || "—", "reason" + (b.reason ? " bad" : ""), "reason"));
      tb.append(tr);
    }
    if (!s.backends.length) {
      const td = el("td", "no backends"); td.colSpan = 16; tb.append(el("tr")); tb.lastChild.append(td);
    }
  }
  if (!shown(d).length) {
    const td = el("td", "no services yet"); td.colSpan = 16; tb.append(el("tr")); tb.lastChild.append(td);
  }
}

function render(d, r) {
  $("name").textContent = d.name || "XLB";
  $("version").textContent = d.version || "";
  document.title = (d.name || "XLB") + " · XLB";
  badge($("lifecycle"), d.lifecycle, stateClass(d.lifecycle));
  badge($("readiness"), d.readiness.ready ? "ready" : "not ready: " + d.readiness.reason, d.readiness.ready ? "ok" : "bad");
  syncSelector(d);
  renderInstance(d);
  renderRates(d, r);
  renderServices(d, r);
  renderConnections(d);
  renderCounts($("refused"), REFUSED, d, r, (x, k) => x.dataplane.counters[k], true);
  renderCounts($("xdp"), VERDICTS, d, r, (x, k) => x.dataplane.counters.xdp_actions[k], false);
  renderBackends(d, r);
  $("figures").dataset.sampleCycle = d.dataplane.sample_cycle;
}

// base is the latest document whose sample precedes last's; rates are
// computed between them. lastOK is when last was fetched.
let base = null, last = null, lastOK = null;

// fresh shows that the figures are current.
function fresh() {
  $("figures").classList.remove("stale");
  $("fetch-error").hidden = true;
  lastOK = new Date();
  $("updated").textContent = "updated " + lastOK.toLocaleTimeString();
}

// stale greys out the figures and says why and since when they are old.
function stale(err) {
  $("figures").classList.add("stale");
  const banner = $("fetch-error");
  banner.textContent = "Fetching the status failed at " + new Date().toLocaleTimeString() + ": " + err.message + ". " +
    (lastOK ? "The greyed-out figures are from " + lastOK.toLocaleTimeString() + " and may be out of date."
      : "No figures yet.") + " Retrying every second.";
  banner.hidden = false;
  badge($("readiness"), "unreachable", "bad");
}

async function load() {
  const r = await fetch(API, { cache: "no-store", credentials: "same-origin" });
  if (!r.ok) throw new Error("HTTP " + r.status + " " + r.statusText);
  return r.json();
}

async function poll() {
  let d;
  try {
    d = await load();
  } catch (e) {
    stale(e);
    return;
  } finally {
    setTimeout(poll, 1000);
  }
  const at = last && last.dataplane.sampled_at_unix_ms;
  if (at !== null && at !== undefined && d.dataplane.sampled_at_unix_ms !== at) base = last;
  last = d;
  // A rendering error is not caught: it reaches the browser's console.
  render(d, ratesBetween(base, d) || NO_RATES);
  fresh();
}

// A new selection redraws the last document at once.
$("service").addEventListener("change", () => { if (last) render(last, ratesBetween(base, last) || NO_RATES); });

poll();
