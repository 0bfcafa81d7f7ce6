// Package bgp is XLB's embedded BGP speaker (DESIGN §6a, §9, issues 15
// and 29): it announces the instance's prefixes (every service's address
// /32 and any configured ones) to the configured peers, each service's
// address only while a service on it is ready, and nothing while the
// instance is drained or shutting down, so that routers spread each VIP's
// flows over every host serving it with ECMP.
//
// The speaker is GoBGP v4 (github.com/osrg/gobgp/v4) used as a library,
// with no gRPC listener and no BGP listener: every session is opened by
// this side, towards the peer's port, from this host's own address toward
// the peer (Options.NextHop), which is also the next hop of every route.
// Nothing is imported from peers.
//
// Graceful restart (RFC 4724) is always on: the restart time is
// bgp.graceful_restart_secs, and every start sets the Restart State and
// Forwarding State bits, so a peer keeps the routes of a predecessor
// (a hot upgrade, a restart or a crash) as stale until this speaker's
// End-of-RIB replaces them. Stop(true), the planned stop, closes the
// sessions without a NOTIFICATION (never a Cease "peer de-configured":
// Cilium #31346, MetalLB #2368). The rule that decides what is announced
// is a pure function: Announce and Routes (rule.go); the speaker takes
// its result, a set of prefixes (SetAnnounced), and announces and
// withdraws each prefix on its own.
//
// Files: rule.go the announce rule; speaker.go the Speaker's life cycle;
// peers.go the peer definitions (timers, graceful restart, TCP MD5, local
// address); nexthop.go this host's address toward a peer (HostAddress,
// the default next hop); paths.go the announced paths; policy.go the
// import policy (only this speaker's own paths); status.go peer states;
// logging.go GoBGP's log/slog records into logrus.
//
// Tests: rule_test.go the rule's table; speaker_test.go without a peer;
// nexthop_test.go HostAddress in a network namespace; bird_test.go
// against a real router, BIRD 2 in a network namespace (birdlab_test.go),
// including a crash of a speaker process (main_test.go) and one of two
// addresses withdrawn.
package bgp
