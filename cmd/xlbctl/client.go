package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// maxBody bounds the status document xlbctl reads.
const maxBody = 16 << 20

// client reads /api/v1/status from one admin listener.
type client struct {
	url        string   // full URL of the status document
	base       *url.URL // the admin listener, path prefix included
	user, pass string   // HTTP Basic credentials when user != ""
	from       string   // where the URL came from (target.from)
	http       *http.Client
}

// statusPath is the status document under the admin URL (DESIGN §3).
const statusPath = "api/v1/status"

// newClient resolves the status URL under t.url (a base URL such as
// http://127.0.0.1:8642, or host:port; a path prefix is kept for
// proxies). Errors: a URL that is not http(s)://host[:port][/prefix], a
// pinned certificate that is not PEM.
func newClient(t target, pass string, timeout time.Duration) (*client, error) {
	if t.socket != "" {
		// The host part names nothing: every connection goes to the
		// socket.
		u := &url.URL{Scheme: "http", Host: "localhost"}
		hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", t.socket)
			},
		}}
		return &client{url: u.JoinPath(statusPath).String(), base: u, from: "the admin socket " + t.socket + ", " + t.from, http: hc}, nil
	}
	admin := t.url
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	u, err := url.Parse(admin)
	if err != nil {
		return nil, fmt.Errorf("admin URL %q (%s): %w", admin, t.from, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("admin URL %q (%s): want http://host:port", admin, t.from)
	}
	hc := &http.Client{Timeout: timeout}
	if t.pinned != nil {
		tc, err := pinnedTLS(t.pinned)
		if err != nil {
			return nil, fmt.Errorf("admin URL from %s: %w", t.from, err)
		}
		hc.Transport = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}
	}
	return &client{url: u.JoinPath(statusPath).String(), base: u, user: t.user, pass: pass, from: t.from, http: hc}, nil
}

// fetch returns the raw body of the status document.
func (c *client) fetch(ctx context.Context) ([]byte, error) {
	return c.request(ctx, http.MethodGet, statusPath)
}

// request sends method to path under the admin URL and returns the raw
// body of a 200 response; anything else is an error that says what to do
// about it.
func (c *client) request(ctx context.Context, method, path string) ([]byte, error) {
	target := c.base.JoinPath(path).String()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	res, err := c.http.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w\nis xlb running (systemctl status xlb)? the admin URL came from %s", err, c.from)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (admin URL from %s)", err, c.from)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized && c.user == "":
		return nil, fmt.Errorf("%s %s: %s: the admin listener requires auth; pass --user and set %s", method, target, res.Status, api.EnvAdminPassword)
	case res.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("%s %s: %s: user %q or %s rejected", method, target, res.Status, c.user, api.EnvAdminPassword)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s %s: %s: %s", method, target, res.Status, firstLine(body))
	case len(body) > maxBody:
		return nil, fmt.Errorf("%s %s: answer larger than %d bytes", method, target, maxBody)
	}
	return body, nil
}

// drain posts a drain (on) or undrain to the instance and returns the
// state it answered (DESIGN §6a).
func (c *client) drain(ctx context.Context, on bool) (api.DrainState, error) {
	path := "api/v1/undrain"
	if on {
		path = "api/v1/drain"
	}
	var st api.DrainState
	body, err := c.request(ctx, http.MethodPost, path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("decode the answer to POST %s: %w", path, err)
	}
	return st, nil
}

// decode parses a status document of a schema version xlbctl knows (1
// or 2); a version 1 document's one service is filled in from its
// top-level fields (schema1Services), so renderers read Services alone.
func decode(body []byte) (*api.Document, error) {
	var d api.Document
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("decode status document: %w", err)
	}
	if d.SchemaVersion < oldestSchema || d.SchemaVersion > api.SchemaVersion {
		return nil, fmt.Errorf("status document schema_version %d; this xlbctl reads %d to %d", d.SchemaVersion, oldestSchema, api.SchemaVersion)
	}
	if d.SchemaVersion == 1 {
		d.Services = schema1Services(&d)
	}
	return &d, nil
}

// get fetches and decodes.
func (c *client) get(ctx context.Context) ([]byte, *api.Document, error) {
	body, err := c.fetch(ctx)
	if err != nil {
		return nil, nil, err
	}
	d, err := decode(body)
	return body, d, err
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
