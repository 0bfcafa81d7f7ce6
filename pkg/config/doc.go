// Package config is the xlb.yaml schema of DESIGN §1 and §9: decoding with
// defaults, validation, the effective config as YAML (for `xlb check`,
// DESIGN §2) and the diff of two configs (for the reload-required
// watcher).
//
// A file gives DESIGN §1's top-level form, one service named after name,
// or §9's `services:` list, never both; either way Config.Services holds
// the services (services.go). Consumers read Config.ServiceList.
//
// Parse and Load report every problem at once as Errors, each naming the
// file, the line and the field path (`xlb.yaml:7: ports[1].local_port:
// ...`); unknown fields are errors. They never log: warnings
// (orphan_ttl_secs below its minimum, an admin or metrics port below 1024,
// a BGP router id that is a service address) are returned for the caller
// to log. Nothing here touches the network or the system; values that depend
// on the host (listen: auto, snat.ip: auto, the default interface) are
// resolved by pkg/instance at runtime, which also checks that every
// explicit snat.ip address is this host's. The limits the data path is
// built with (port mappings, interfaces, SNAT addresses, backends, the flow
// table's default size), the XDP attach modes and the orphan and embryonic
// TTLs' defaults are pkg/limits' constants, the sizes generated from
// bpf/layout.h; it is the only package of the module this one imports.
//
// The optional health_check block (DESIGN §6b) is nil when absent: no
// active checks. An omitted remote_port is the local_port, except with
// provider.kubernetes, where it stays 0: each backend's own port, taken
// from its EndpointSlice (issue 14).
//
// The optional bgp block (DESIGN §6a, issue 15) is nil when absent: no
// BGP speaker. TCP MD5 passwords come from the environment variables its
// peers name (password_env), never from the file; that each announced
// prefix is this host's is checked at runtime, not here.
//
// A field set to null (`key:` or `key: ~`) counts as omitted. Aliases are
// followed; merge keys (<<) are rejected. Integers must be YAML integers
// (`port: "80"` is an error); string fields take any scalar as its text.
package config
