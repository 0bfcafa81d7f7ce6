package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// AdminAddr is the admin listener inside every XLB host (the role's
// default).
const AdminAddr = "127.0.0.1:9090"

// Get requests path from the host's admin listener, from inside the
// host's network namespace.
func (h *Host) Get(path string) (int, []byte, error) {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return h.Dial(ctx, addr)
		},
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + AdminAddr + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Status reads /api/v1/status.
func (h *Host) Status() (api.Document, error) {
	var d api.Document
	code, b, err := h.Get("/api/v1/status")
	if err != nil {
		return d, err
	}
	if code != http.StatusOK {
		return d, fmt.Errorf("%s: /api/v1/status: %d %s", h.Inventory, code, b)
	}
	err = json.Unmarshal(b, &d)
	return d, err
}
