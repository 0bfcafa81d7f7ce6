// Package daemon is the XLB process: it runs one instance (pkg/instance)
// through its states, interprets signals, speaks sd_notify to systemd,
// serves the admin and metrics listeners, runs the maintenance loop and the
// config watch, and keeps the shutdown window of the seed document's "XLB
// shutdown behavior".
//
// States (api.Lifecycle), in order; the process never goes back:
//
//	starting       listeners up (/healthz answers, /readyz is 503); the
//	               instance comes up; the first maintenance sample is awaited
//	running        READY=1 sent; the watchdog pings while samples arrive
//	shutting_down  on the first SIGTERM/SIGINT: STOPPING=1 with the window,
//	               discovery and maintenance stopped, the data-path shutdown
//	               flag set; a second stop signal ends the window early
//	(stopped)      the instance is down and Run returns
//
// A stop signal during starting undoes the bring-up and Run returns nil.
// SIGHUP and SIGUSR2 are logged and ignored.
//
// publish.go is the only writer of the snapshot (pkg/snapshot): every
// other file hands it what changed. Status and metrics read the snapshot
// and nothing else.
package daemon
