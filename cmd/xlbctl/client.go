package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// maxBody bounds the status document xlbctl reads.
const maxBody = 16 << 20

// client reads /api/v1/status from one admin listener.
type client struct {
	url        string // full URL of the status document
	user, pass string // HTTP Basic credentials when user != ""
	http       *http.Client
}

// newClient resolves the status URL under admin (a base URL such as
// http://127.0.0.1:9090, or host:port; a path prefix is kept for proxies).
func newClient(admin, user, pass string, timeout time.Duration) (*client, error) {
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	u, err := url.Parse(admin)
	if err != nil {
		return nil, fmt.Errorf("--admin %q: %w", admin, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--admin %q: want http://host:port", admin)
	}
	u = u.JoinPath("api/v1/status")
	return &client{url: u.String(), user: user, pass: pass, http: &http.Client{Timeout: timeout}}, nil
}

// fetch returns the raw body of a 200 response; anything else is an error
// that says what to do about it.
func (c *client) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", c.url, err)
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized && c.user == "":
		return nil, fmt.Errorf("GET %s: %s: the admin listener requires auth; pass --user and set %s", c.url, res.Status, api.EnvAdminPassword)
	case res.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("GET %s: %s: user %q or %s rejected", c.url, res.Status, c.user, api.EnvAdminPassword)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s: %s", c.url, res.Status, firstLine(body))
	case len(body) > maxBody:
		return nil, fmt.Errorf("GET %s: document larger than %d bytes", c.url, maxBody)
	}
	return body, nil
}

// decode parses a status document of the schema version xlbctl knows.
func decode(body []byte) (*api.Document, error) {
	var d api.Document
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("decode status document: %w", err)
	}
	if d.SchemaVersion != api.SchemaVersion {
		return nil, fmt.Errorf("status document schema_version %d; this xlbctl reads %d", d.SchemaVersion, api.SchemaVersion)
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
