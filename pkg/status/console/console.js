// XLB admin console: polls the status API every second and renders it.
// Only textContent is used, so names from discovery are never parsed as HTML.
"use strict";

const API = new URL("../api/v1/status", document.baseURI);

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? n + " B" : n.toFixed(1) + " " + units[i];
}

function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return d + "d " + h + "h " + m + "m";
  if (h) return h + "h " + m + "m " + (s % 60) + "s";
  if (m) return m + "m " + (s % 60) + "s";
  return s + "s";
}

function fill(dl, rows) {
  dl.replaceChildren();
  for (const [k, v] of rows) { dl.append(el("dt", k), el("dd", v)); }
}

function badge(e, text, cls) { e.textContent = text; e.className = "badge " + cls; }

// The state names come from the document (pkg/status/api: Lifecycles and
// BackendStates); this table only gives each its CSS class. A name not
// listed here shows as "bad".
const STATE_CLASS = {
  starting: "warn", running: "ok", handing_over: "warn", shutting_down: "warn",
  routable: "ok", unhealthy: "bad", draining: "warn", unreachable: "bad",
};

function stateClass(name) { return STATE_CLASS[name] || "bad"; }

// healthText is a backend's last active health check: "-" without checks,
// "pending" before the first, else the result, its error and its age.
function healthText(h) {
  if (!h) return "-";
  if (!h.last_result) return "pending";
  const age = Math.max(0, Math.round((Date.now() - h.last_check_unix_ms) / 1000));
  return h.last_result + (h.last_error ? ": " + h.last_error : "") + " (" + age + " s ago)";
}

function render(d) {
  $("name").textContent = d.name || "XLB";
  $("version").textContent = d.version || "";
  document.title = (d.name || "XLB") + " · XLB";
  badge($("lifecycle"), d.lifecycle, stateClass(d.lifecycle));
  badge($("readiness"), d.readiness.ready ? "ready" : "not ready: " + d.readiness.reason, d.readiness.ready ? "ok" : "bad");

  const dp = d.dataplane;
  const ports = d.listen.ports.map(p => p.local_port + "→" + (p.remote_port || "each backend's port")).join(", ");
  const xdp = dp.xdp_attachments.map(a => a.interface + " (" + a.mode + ")").join(", ") || "none";
  const cfg = d.config.missing ? "file missing" : d.config.invalid ? "file invalid: " + d.config.invalid
    : d.config.reload_required ? "reload required (systemctl reload xlb): " + d.config.changed_keys.join(", ") : "up to date";
  const up = d.upgrades;
  const started = !up.start ? "—" : up.start === "fresh" ? "fresh"
    : up.start + " with " + up.adopted_pairs + " connection pairs";
  const upgrades = up.ok + " ok, " + up.failed + " failed" + (up.last_failure ? " — last: " + up.last_failure : "");
  const bgp = !d.bgp ? "off" : d.bgp.peers.filter(p => p.state === "established").length + "/" + d.bgp.peers.length
    + " peers established; " + (d.bgp.announced.length ? "announcing " + d.bgp.announced.join(", ") : "announcing nothing");
  const rows = [
    ["Uptime", duration(d.uptime_seconds)],
    ["Listen", d.listen.ip + "  " + ports],
    ["SNAT", (d.snat.ips || []).join(", ") || d.snat.ip || "—"],
    ["XDP", xdp],
    ["BGP", bgp],
    ["Drained", d.drained ? "yes: readiness answers draining; every packet is still forwarded" : "no"],
    ["Provider", d.provider.name + (d.provider.healthy ? "" : " — " + d.provider.error)],
    ["Sample age", dp.sample_age_ms === null ? "no sample yet" : dp.sample_age_ms + " ms"],
    ["Config", cfg],
    ["Started", started],
    ["Hot upgrades", upgrades],
  ];
  const reset = (d.host_settings || []).filter(h => h.repairs_total > 0)
    .map(h => h.name + " put back " + h.repairs_total + "×").join(", ");
  if (d.host_settings && d.host_settings.length) rows.push(["Sysctls", reset || "guarded, never reset"]);
  const unpinned = dp.features.find(f => f.path === "unpinned");
  if (unpinned) rows.push(["Pinned state", "none: a restart or crash loses every connection (" + unpinned.detail + ")"]);
  if (d.shutdown) rows.unshift(["Shutdown", d.shutdown.seconds_left + " s left"]);
  fill($("instance"), rows);

  const c = d.connections, fm = dp.flow_map, k = dp.counters;
  const pct = fm.capacity ? (100 * fm.entries / fm.capacity).toFixed(1) + "%" : "—";
  fill($("connections"), [
    ["Active", c.active], ["Time-wait", c.timewait], ["Opened", c.opened_total],
    ["Closed", c.closed_total + " (client FIN " + c.closed_by.client_fin + ", backend FIN " + c.closed_by.backend_fin +
      ", client RST " + c.closed_by.client_rst + ", backend RST " + c.closed_by.backend_rst + ")"],
    ["Orphaned", c.orphaned_total],
    ["Embryonic expired", c.embryonic_expired_total],
    ["Flow map", fm.entries + " / " + fm.capacity + " entries (" + pct + ")"],
    ["SNAT ports", "taken over " + k.snat_takeovers_total + ", fallbacks " + k.snat_fallbacks_total +
      ", exhausted " + k.snat_port_exhausted_total + ", held-port drops " + k.hold_drops_total],
    ["Dropped", "out-of-window RSTs " + k.rst_out_of_window_total + ", TTL ≤ 1 " + k.ttl_exceeded_total +
      ", no next hop " + k.fib_miss_total],
    ["ICMP translated", "to clients " + k.icmp_to_client_total + ", to backends " + k.icmp_to_backend_total],
    ["Not ours", k.not_ours_total + " (frames for another host's MAC, passed to the kernel)"],
  ]);

  const tb = $("backends");
  tb.replaceChildren();
  for (const b of d.backends) {
    const tr = el("tr");
    tr.append(el("td", b.name), el("td", b.ip), el("td", b.state, stateClass(b.state)),
      el("td", b.available_for_new_connections ? "yes" : "no"),
      el("td", b.active_connections, "n"), el("td", b.timewait_connections, "n"), el("td", b.opened_total, "n"),
      el("td", bytes(b.sent_bytes_total), "n"), el("td", bytes(b.received_bytes_total), "n"),
      el("td", healthText(b.health), b.health && b.health.last_result === "fail" ? "bad" : ""));
    if (b.reason) tr.title = b.reason;
    tb.append(tr);
  }
  if (!d.backends.length) {
    const td = el("td", "no backends"); td.colSpan = 10; tb.append(el("tr")); tb.lastChild.append(td);
  }
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

async function poll() {
  try {
    const r = await fetch(API, { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
  } catch (e) {
    badge($("readiness"), "unreachable: " + e.message, "bad");
  } finally {
    setTimeout(poll, 1000);
  }
}

poll();
