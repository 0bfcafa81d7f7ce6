// Package daemon is the XLB process: it runs one instance (pkg/instance)
// through its states, interprets signals, speaks sd_notify to systemd,
// serves the admin and metrics listeners, runs the maintenance loop and the
// config watch, and keeps the shutdown window of the seed document's "XLB
// shutdown behavior".
//
// States (api.Lifecycle), in order:
//
//	starting       listeners up (/healthz answers, /readyz is 503); the
//	               instance comes up; the first maintenance sample is awaited;
//	               the BGP speaker (bgp.go) starts, with no session yet
//	running        READY=1 sent; the watchdog pings while samples arrive; the
//	               speaker announces while ready and not drained
//	handing_over   on SIGUSR2 (hot upgrade, handoff.go): still serving and
//	               ready while the binary on disk takes over the pinned state;
//	               back to running when it fails, or the process exits (the
//	               speaker stops without a NOTIFICATION: graceful restart)
//	shutting_down  on the first SIGTERM/SIGINT: the BGP routes withdrawn
//	               first, STOPPING=1 with the delay and the window, packets
//	               forwarded as before for what is left of
//	               bgp.withdraw_delay_secs from the withdrawal; then
//	               discovery and maintenance stopped, the data-path shutdown
//	               flag set; a second stop signal ends the delay and the
//	               window early
//	(stopped)      the instance is down, its pins removed, and Run returns
//
// A stop signal during starting undoes the bring-up (or, when the start
// adopted a predecessor's pins, leaves them for the next start) and Run
// returns nil. SIGHUP is logged and ignored.
//
// A process started by a predecessor's hand-off (successor.go) goes through
// starting without serving its inherited listeners, which the predecessor
// still answers on; it serves them once it took over, and sends
// MAINPID= with READY=1.
//
// An operator's drain (drain.go) is recorded in the runtime directory
// (drainstate.go) and restored at the next start, before the first BGP
// verdict, so a restart or a crash keeps it. The admin listener also
// serves a unix socket (admin.socket), the one place where drain and
// undrain need no credentials; a hot upgrade hands it over with the TCP
// listeners.
//
// publish.go is the only writer of the snapshot (pkg/snapshot): every
// other file hands it what changed. Status and metrics read the snapshot
// and nothing else.
package daemon
