package weblisten

import (
	"crypto/sha256"
	"net/http"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// maxCached bounds the remembered bcrypt outcomes (the toolkit keeps 100).
const maxCached = 100

// Guard wraps next with the file's http_server_config.headers (every
// response), rate_limit (429 beyond it) and basic_auth_users (401 with
// WWW-Authenticate; an accepted request carries its user, User),
// re-reading the file when it changed; a file that
// became invalid answers 500. Requests for which open returns true skip
// the rate limit and auth (nil open: none does). A nil f returns next.
//
// Passwords are checked with bcrypt, one check at a time (it is
// CPU-heavy); an unknown user is checked against a fixed hash so that
// the answer takes as long as for a known one. Outcomes are remembered
// under a SHA-256 digest of user, hash and password, so a scraper's
// repeated requests cost one bcrypt check, and a changed hash in the file
// is checked anew.
func (f *File) Guard(next http.Handler, open func(*http.Request) bool) http.Handler {
	if f == nil {
		return next
	}
	return &guard{f: f, next: next, open: open, cache: map[[sha256.Size]byte]bool{}}
}

type guard struct {
	f    *File
	next http.Handler
	open func(*http.Request) bool

	bcryptMu sync.Mutex
	cacheMu  sync.Mutex
	cache    map[[sha256.Size]byte]bool
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l, err := g.f.current()
	if err != nil {
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	for k, v := range l.cfg.HTTPConfig.Header {
		w.Header().Set(k, v)
	}
	if g.open != nil && g.open(r) {
		g.next.ServeHTTP(w, r)
		return
	}
	if l.limiter != nil && !l.limiter.Allow() {
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	if len(l.cfg.Users) > 0 {
		if !g.authorized(r, l) {
			w.Header().Set("WWW-Authenticate", `Basic realm="xlb"`)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
			return
		}
		user, _, _ := r.BasicAuth()
		r = WithUser(r, user)
	}
	g.next.ServeHTTP(w, r)
}

// authorized checks r's basic-auth credentials against the file's users.
func (g *guard) authorized(r *http.Request, l *loaded) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	hash, known := l.cfg.Users[user]
	h := string(hash)
	if !known {
		h = unknownUserHash()
	}
	key := sha256.Sum256([]byte(user + "\x00" + h + "\x00" + pass))
	g.cacheMu.Lock()
	res, cached := g.cache[key]
	g.cacheMu.Unlock()
	if !cached {
		g.bcryptMu.Lock()
		res = bcrypt.CompareHashAndPassword([]byte(h), []byte(pass)) == nil && known
		g.bcryptMu.Unlock()
		g.cacheMu.Lock()
		if len(g.cache) >= maxCached {
			clear(g.cache)
		}
		g.cache[key] = res
		g.cacheMu.Unlock()
	}
	return res && known
}

// unknownUserHash is a bcrypt hash (of random bytes, at the default cost)
// that an unknown user's password is checked against.
var unknownUserHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte("xlb: no such user"), bcrypt.DefaultCost)
	if err != nil {
		panic("weblisten: bcrypt: " + err.Error())
	}
	return string(h)
})
