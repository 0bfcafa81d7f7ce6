package status

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// PasswordFromEnv returns the admin password for username (config
// admin.auth.username). Without a username auth is off and it returns "".
// With one, an unset or empty XLB_ADMIN_PASSWORD is an error so that
// startup fails instead of serving an unprotected or unusable listener.
func PasswordFromEnv(username string) (string, error) {
	if username == "" {
		return "", nil
	}
	pw, set := os.LookupEnv(api.EnvAdminPassword)
	switch {
	case !set:
		return "", fmt.Errorf("status: admin.auth.username is %q but %s is not set; export the admin password in %s", username, api.EnvAdminPassword, api.EnvAdminPassword)
	case pw == "":
		return "", fmt.Errorf("status: admin.auth.username is %q but %s is empty; export the admin password in %s", username, api.EnvAdminPassword, api.EnvAdminPassword)
	}
	return pw, nil
}

// isProbe says whether r asks for /healthz or /readyz, which stay open
// without auth whatever secures the listener (DESIGN §3): health checkers,
// the Ansible role's verify step and load balancers poll them, and they
// tell only whether the instance serves and why it is not ready.
func isProbe(r *http.Request) bool {
	return r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
}

// basicAuth guards next with HTTP Basic auth. Username and password are
// compared as SHA-256 digests with crypto/subtle, so neither their
// contents nor their lengths leak through timing.
type basicAuth struct {
	user, pass [sha256.Size]byte
}

func newBasicAuth(username, password string) *basicAuth {
	return &basicAuth{user: sha256.Sum256([]byte(username)), pass: sha256.Sum256([]byte(password))}
}

func (a *basicAuth) ok(r *http.Request) bool {
	u, p, found := r.BasicAuth()
	if !found {
		return false
	}
	uh, ph := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
	uok := subtle.ConstantTimeCompare(uh[:], a.user[:])
	pok := subtle.ConstantTimeCompare(ph[:], a.pass[:])
	return uok&pok == 1
}

func (a *basicAuth) wrap(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.ok(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="xlb"`)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		user, _, _ := r.BasicAuth()
		next.ServeHTTP(w, weblisten.WithUser(r, user))
	})
}
