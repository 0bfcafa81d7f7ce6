// Package fleet runs the Ansible role and playbooks in ansible/ for real
// against a lab fleet of booted Debian hosts, with live client traffic.
//
// The lab (Start; built on internal/testnet: its address plan, its
// namespaces and links, every name prefixed; TestNetwork brings up the
// network alone in about a second):
//
//	client 203.0.113.10 ── router ──┬── xlb1 192.0.2.11  (booted Debian container, XLB)
//	        (cli)        203.0.113.1├── xlb2 192.0.2.12
//	                     192.0.2.1  ├── xlb3 192.0.2.13
//	                      (rtr)     ├── backend1 192.0.2.31 ┐ banner + echo
//	                                ├── backend2 192.0.2.32 ├ servers on :8080
//	                                └── backend3 192.0.2.33 ┘
//	                                    (one bridge in namespace "lan")
//
// The router spreads the service address 198.51.100.10 over the three
// hosts' own addresses with a resilient nexthop group (64 buckets, L4
// hash: net.ipv4.fib_multipath_hash_policy=1). Each XLB host runs in its
// own network namespace, booted with systemd by test/hostlab, and holds
// the service address on lo (the role's xlb-vip.service) with XDP native
// on eth0: one-arm, so the data path answers with XDP_TX both ways
// (clients through the router, backends on the bridge). The bridge ports
// facing the XLB hosts carry a native XDP_PASS program so that native
// XDP_TX is delivered.
//
// Ansible reaches the containers with the community.docker.nsenter
// connection plugin (ansible_nsenter_pid = the container's PID 1) and the
// router with the same plugin through a holder process that sleeps in the
// router's namespace. The drain hook is ansible/hooks/linux_nexthop_group.yml:
// it edits the router's group with `ip nexthop`.
//
// Timers, and why flows of other hosts never move: a resilient group moves
// a bucket to another next hop only when its current next hop is
// overweight and the bucket was idle for the group's idle timer (or is
// forced after unbalanced_timer, which is 0 here: never), or at once when
// its next hop leaves the group. The drain gives the drained host weight 1
// (it wants no bucket) and an idle timer of DrainIdleTimer; the other hosts
// are underweight then, so their buckets stay. Each of the drained host's
// buckets moves once idle, so no connection is moved in the middle of an
// exchange: new connections never fail. A long-lived connection on the
// drained host (quiet between its LongLivedInterval messages) moves once
// quiet for DrainIdleTimer, and the host it lands on resets it: those are
// the resets counted on drained hosts, bounded by the long-lived
// connections the host carried when its drain began (plus any that landed
// on it while its buckets were moving). When the host returns, the others
// are overweight, and their buckets move to it only after IdleTimer
// (longer than LongLivedInterval) without a packet: the long-lived
// connections they carry never move. The returning host takes buckets as
// they go idle.
//
// A config change (site.yml with a changed xlb.yaml on the running fleet)
// goes one host at a time through the change procedure with the default
// method, reload: the test reads each host's journal and requires one
// hand-off per host, never two at once, no drain, and not one connection
// that breaks or fails. The first rollout (v1 -> v2) is a hot upgrade
// too (xlb_upgrade_method: reload): no host is drained, the group never
// changes, and the same zero is required. The second (v2 -> v3, with a
// failing host) drains and restarts (xlb_upgrade_method: restart), which
// is where the timers above and the reset bound below matter.
//
// The backends' sockets of moved connections are cleared by their TCP
// keepalive (BackendKeepAlive), which also clears the drained host's pairs;
// the rolling upgrade's connection wait (xlb_drain_wait_connections, up to
// no active connection) therefore ends before the stop, and the stop
// resets nothing.
package fleet
