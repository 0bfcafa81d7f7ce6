package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// AdminAddr is the admin listener inside every XLB host (the role's
// default, the daemon's).
var AdminAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(config.DefaultAdminPort))

// The lab's admin Basic auth (xlb_admin_username, xlb_admin_password):
// a password with every character systemd's env-file parsing would
// change unquoted, so that every step that reads the status API through
// the role or with Get shows that it reached the daemon unchanged.
const (
	AdminUser     = "fleet-admin"
	AdminPassword = "p\"a'ss\\w$o rd#1 ;x `id` $HOME \\"
)

// Get requests path from the host's admin listener, from inside the
// host's network namespace, with the lab's credentials.
func (h *Host) Get(path string) (int, []byte, error) {
	return h.get(path, true)
}

func (h *Host) get(path string, auth bool) (int, []byte, error) {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return h.Dial(ctx, addr)
		},
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+AdminAddr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if auth {
		req.SetBasicAuth(AdminUser, AdminPassword)
	}
	resp, err := c.Do(req)
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
