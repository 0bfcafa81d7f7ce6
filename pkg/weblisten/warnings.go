package weblisten

import (
	"fmt"
	"net/netip"
)

// Exposure is what one listener shows a client, for Warnings.
type Exposure struct {
	// Name is the listener's config key: "admin" or "metrics".
	Name string
	// Address is the bound address (config NAME.address); the
	// unspecified address counts as reachable beyond loopback.
	Address netip.Addr
	// Auth says whether every client must authenticate (basic auth from
	// any source, or verified client certificates); TLS whether the
	// listener serves HTTPS.
	Auth, TLS bool
	// Shows says what an unauthenticated client learns or can do there.
	Shows string
}

// Warnings returns what the daemon logs at startup for a listener: none
// on a loopback address; beyond loopback (0.0.0.0 and :: included) one
// warning when auth is off (issue 16: every listener reachable beyond
// loopback without auth is logged), or when basic auth travels without
// TLS. An invalid address yields none.
func Warnings(e Exposure) []string {
	addr := e.Address.Unmap()
	switch {
	case !addr.IsValid() || addr.IsLoopback():
		return nil
	case !e.Auth:
		return []string{fmt.Sprintf(
			"%[1]s listener on %[2]s is reachable beyond loopback without authentication: anyone who can reach it %[3]s; "+
				"bind %[1]s.address to 127.0.0.1, or set basic_auth_users and tls_server_config in the file %[1]s.web_config_file names", e.Name, addr, e.Shows)}
	case !e.TLS:
		return []string{fmt.Sprintf(
			"%[1]s listener on %[2]s uses HTTP Basic auth without TLS: the credentials cross the network in cleartext; "+
				"set tls_server_config in the file %[1]s.web_config_file names, or bind %[1]s.address to 127.0.0.1", e.Name, addr)}
	}
	return nil
}
