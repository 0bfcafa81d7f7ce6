// Package fleet runs the Ansible role and playbooks in ansible/ for real
// against a lab fleet of booted Debian hosts behind a real BGP router,
// with live client traffic.
//
// The lab (Start; built on internal/testnet: its address plan, its
// namespaces and links, every name prefixed; TestNetwork brings up the
// network alone in about a second):
//
//	client 203.0.113.10 ── router ──┬── xlb1 192.0.2.11  (booted Debian container, XLB)
//	        (cli)        203.0.113.1├── xlb2 192.0.2.12
//	                     192.0.2.1  ├── xlb3 192.0.2.13
//	                      (rtr,     ├── backend1 192.0.2.31 ┐ banner + echo
//	                       bird2)   ├── backend2 192.0.2.32 ├ servers on :8080
//	                                └── backend3 192.0.2.33 ┘
//	                                    (one bridge in namespace "lan")
//
// The router runs bird2 (pkg/bgp/birdtest, AS RouterASN), which accepts
// a BGP session from each host's embedded speaker (AS XLBASN; router id
// the default, auto: the host's own address toward the router, one per
// host) and installs the VIP 198.51.100.10/32 they
// announce as one multipath route in the router's kernel (merge paths),
// a next hop per announcing host. The kernel spreads flows over the next
// hops by hash-threshold with an L4 hash
// (net.ipv4.fib_multipath_hash_policy=1) and skips a next hop whose
// neighbour entry failed (fib_multipath_use_neigh=1). Each XLB host runs
// in its own network namespace, booted with systemd by test/hostlab, and
// holds the service address on lo (the role's xlb-vip.service) with XDP
// native on eth0: one-arm, so the data path answers with XDP_TX both ways
// (clients through the router, backends on the bridge). The bridge ports
// facing the XLB hosts carry a native XDP_PASS program so that native
// XDP_TX is delivered.
//
// Ansible reaches the containers with the community.docker.nsenter
// connection plugin (ansible_nsenter_pid = the container's PID 1), as
// nsenter_pipelining (testdata/plugins/connection: the same plugin with
// pipelining, which ansible.cfg turns on), and the router with the same
// plugin through a holder process that sleeps in the router's namespace.
// Facts are gathered once per host (the role needs the min and network
// subsets) and kept in a jsonfile cache in the test's directory; each
// run's CPU time is logged, a measure that does not depend on the load.
// site.yml ends only when every host announces the VIP (the role waits
// for status bgp.announced); the router installs the route a moment
// later, so the first connection after it retries within a bound. The drain hook is the role's default, bgp: XLB's
// drain API, then `birdc -s SOCK show route for {prefix} all` on the
// router until no path goes via the host.
//
// Timers. HoldSecs (3 s, both sides; keepalives every second): a host
// that goes silent — the lab removes its link, then kills its daemon, so
// not even a FIN reaches the router — leaves the route when bird's hold
// timer expires, which bird treats as an error: it flushes the host's
// route at once (no graceful restart without long-lived GR). A daemon
// that dies while its host lives is different: its kernel closes the
// session's socket, and a closed session with graceful restart negotiated
// makes bird keep the host's route as stale for the restart time the host
// advertised, GracefulRestartSecs (30 s) — right for a crash, since the
// XDP program stays attached and keeps forwarding, and systemd restarts
// xlb (RestartSec=2s), whose speaker refreshes the route within seconds.
// A hot upgrade is the same for bird: the successor's session replaces
// the predecessor's, which stops without a NOTIFICATION, so the route
// never leaves. After a hold-timer error bird refuses the host for its
// error wait time (RouterErrorWaitSecs, 2 s here; bird's default is 60 s
// and more).
//
// Why flows of other hosts move. Hash-threshold splits the hash space into
// equal ranges, one per next hop in the route's order (bird sorts them by
// address: xlb1, xlb2, xlb3). When a path leaves or returns, the ranges
// are recomputed: with xlb1 gone, xlb2's range [1/3, 2/3) becomes
// [0, 1/2) and the flows it had in [1/2, 2/3) now go to xlb3, which does
// not know them and resets them; when xlb1 returns, the flows opened
// meanwhile in [0, 1/3) on xlb2 and in [1/2, 2/3) on xlb3 move. The middle
// host leaving moves no one else's flows (xlb1's and xlb3's ranges only
// grow); its return does. A drained host's own flows all move at once,
// when its path leaves. So with restarts (xlb_upgrade_method restart)
// long-lived connections break on drained hosts and on hosts in service
// right after a route change: the test counts both per host and fails only
// on a break with neither cause. Resilient hashing (a Linux resilient
// nexthop group, a vendor's resilient ECMP) would move only the leaving
// host's buckets, but bird 2 installs routes with inline next hops, not
// nexthop objects, so it cannot use one. A hot upgrade (reload, the
// default method) never changes the route: zero moved.
//
// A config change (site.yml with a changed xlb.yaml on the running fleet)
// goes one host at a time through the change procedure with the default
// method, reload: the test reads each host's journal and requires one
// hand-off per host, never two at once, no drain, the route in every
// sample, and not one connection that breaks or fails. The first rollout
// (v1 -> v2) is a hot upgrade too, with the same zeros. `xlbctl drain`
// takes a host's path out of the route within 2 s and undrain returns it.
// The second rollout (v2 -> v3, with a failing host) drains and restarts
// (xlb_upgrade_method: restart); the last step crashes a host's daemon,
// then kills the host.
//
// The lab's admin listener needs Basic auth (xlb_admin_username,
// xlb_admin_password) with a password holding every character systemd's
// env-file parsing changes unquoted (quotes, backslashes, '$', '#', ';',
// blanks, backquotes): after site.yml each host's xlb runs with it
// unchanged (/proc/PID/environ), the status API refuses a request without
// it, and every later step reads the API with it (the role, Host.Get,
// xlbctl). Before the traffic starts, site.yml is run twice in a way xlb
// would refuse: a username without a password (check mode: the preflight
// fails on every host), and an unknown XLB_DISABLE_FEATURES with a changed
// xlb.yaml (`xlb check --env-file` fails on every host in the first play,
// the host-by-host play never runs, no file and no process changes).
// render_test.go runs the role's preflight and rendering without hosts:
// the environment file's quoting read back with pkg/envfile (systemd's
// rules) and a shell, and the rejections above.
//
// The backends' sockets of moved connections are cleared by their TCP
// keepalive (BackendKeepAlive), which also clears the drained host's pairs;
// the rolling upgrade's connection wait (xlb_drain_wait_connections, up to
// no active connection) therefore ends before the stop, and the stop
// resets no connection a client still holds. A backend that was waiting
// for the ACK of an echo when the route moved retransmits rather than
// probes, which keeps its pair on the drained host fresh: such pairs may
// outlast the wait, and the test bounds them by the long-lived connections
// the drain moved off that host (checkActiveAtStop).
package fleet
