package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/config"
)

// envAdminURL is the admin URL when --admin is not given.
const envAdminURL = "XLB_ADMIN_URL"

// defaultSocket is the admin socket when the default --config does not
// exist (tests point it elsewhere).
var defaultSocket = config.DefaultAdminSocket

// target is the admin listener xlbctl talks to and how it got there.
type target struct {
	// socket, when set, is the admin unix socket (issue 28): every
	// request goes there, url is not used and no credentials are sent.
	socket string
	url    string // base URL: scheme, host, port, an optional path prefix
	user   string // HTTP Basic user, "" for none
	// pinned is the PEM certificate of the admin listener's web config
	// (tls_server_config), trusted for this listener; nil otherwise.
	pinned []byte
	from   string // where url came from, for error messages
}

// resolveTarget finds the admin listener in the order the issues give
// (issue 16, item 6; issue 28): --admin, then --socket, then
// XLB_ADMIN_URL, then the xlb.yaml at --config, read with pkg/config as
// the daemon reads it: its admin socket (admin.socket) when it exists and
// this user may connect to it (root: it is mode 0600), else admin.address
// and admin.port. Only when --config is the default and that file does
// not exist do the daemon's defaults (the socket
// config.DefaultAdminSocket, else 127.0.0.1, config.DefaultAdminPort)
// apply. --user wins over admin.auth.username, which is used only for a
// URL from the file; the socket needs no credentials. Errors: an
// unreadable or invalid xlb.yaml, or an unreadable web config file; each
// says how to get past it.
func resolveTarget(o options, getenv func(string) string) (target, error) {
	switch {
	case o.set["admin"]:
		return target{url: o.admin, user: o.user, from: "--admin"}, nil
	case o.set["socket"]:
		return target{socket: o.socket, from: "--socket"}, nil
	case getenv(envAdminURL) != "":
		return target{url: getenv(envAdminURL), user: o.user, from: envAdminURL}, nil
	}
	cfg, _, err := config.Load(o.config)
	switch {
	case err != nil && !o.set["config"] && errors.Is(err, fs.ErrNotExist):
		if socketUsable(defaultSocket) {
			return target{socket: defaultSocket, from: "the default (no " + o.config + ")"}, nil
		}
		return target{url: "http://" + hostPort(netip.IPv4Unspecified(), config.DefaultAdminPort), user: o.user,
			from: "the default (no " + o.config + ")"}, nil
	case err != nil:
		return target{}, fmt.Errorf("admin URL from %s: %w\n(pass --admin URL or set %s)", o.config, err, envAdminURL)
	}
	if socketUsable(cfg.Admin.Socket) {
		return target{socket: cfg.Admin.Socket, from: "admin.socket of " + o.config}, nil
	}
	t := target{url: "http://" + hostPort(cfg.Admin.Address, cfg.Admin.Port), user: o.user, from: o.config}
	if t.user == "" && cfg.Admin.Auth != nil {
		t.user = cfg.Admin.Auth.Username
	}
	if cfg.Admin.WebConfigFile != "" {
		tls, cert, err := webConfigTLS(cfg.Admin.WebConfigFile)
		if err != nil {
			return target{}, fmt.Errorf("admin URL from %s: admin.web_config_file: %w\n(pass --admin URL or set %s)", o.config, err, envAdminURL)
		}
		if tls {
			t.url = "https" + t.url[len("http"):]
			t.pinned = cert
		}
	}
	return t, nil
}

// hostPort is where a client reaches a listener bound to addr:port: an
// unspecified address (0.0.0.0, ::) binds every address, loopback
// included, so this host reaches it on 127.0.0.1 (::1 for ::).
func hostPort(addr netip.Addr, port uint16) string {
	switch {
	case addr == netip.IPv6Unspecified():
		addr = netip.IPv6Loopback()
	case !addr.IsValid() || addr.IsUnspecified():
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.AddrPortFrom(addr, port).String()
}

// socketUsable says whether path is a unix socket this user may connect
// to (write permission on the file; the daemon's is mode 0600, root's)
// and a process serves: a socket left by a crashed daemon, or by one
// whose successor does not serve it, is passed over for the HTTP address.
func socketUsable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || unix.Access(path, unix.W_OK) != nil {
		return false
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
