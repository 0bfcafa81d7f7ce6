package status

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// routes builds the admin routes (DESIGN §3). GET patterns also answer
// HEAD; any other method on a known path is 405 with Allow, any other
// path 404 (net/http.ServeMux). auth, when non-nil, guards the API and
// the console; the probes stay open for orchestrators. overSocket: the
// routes of the admin socket, whose commands need no credentials.
func (s *Server) routes(auth *basicAuth, overSocket bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /api/v1/status", auth.wrap(http.HandlerFunc(s.status)))
	// Commands: behind auth like the API, over HTTP only for a request
	// that proved who it is (issue 28), and refused to cross-origin
	// browser requests (a web page must not drain the instance through
	// the operator's browser); curl and xlbctl send no Origin.
	commands := http.NewCrossOriginProtection()
	mux.Handle("POST /api/v1/drain", auth.wrap(commands.Handler(s.drainHandler(true, overSocket))))
	mux.Handle("POST /api/v1/undrain", auth.wrap(commands.Handler(s.drainHandler(false, overSocket))))
	mux.Handle("GET /admin/", auth.wrap(consoleHandler()))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin/", http.StatusFound)
	})
	return commonHeaders(mux)
}

// commonHeaders sets headers every response carries.
func commonHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// healthz answers 200 "ok" whenever the process serves, in every
// lifecycle state (DESIGN §3).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

// readyz answers 200 "ready", or 503 with the stable reason
// (snapshot.Snapshot.Readiness; "starting" before the first publish): one
// bare word for an instance-wide reason, else each unready service's as
// "service NAME: REASON" joined by "; " (DESIGN §9). With ?service=NAME
// it answers for that service alone (snapshot.Snapshot.ServiceReadiness,
// a bare reason), 404 when no service has that name.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	snap := s.opts.Store.Load()
	name, one := r.URL.Query()["service"]
	if snap == nil {
		writeText(w, http.StatusServiceUnavailable, string(api.ReasonStarting))
		return
	}
	var ready bool
	var reason api.Reason
	if one {
		var known bool
		if ready, reason, known = snap.ServiceReadiness(name[0], s.opts.Now()); !known {
			writeText(w, http.StatusNotFound, "no service "+strconv.Quote(name[0]))
			return
		}
	} else {
		ready, reason = snap.Readiness(s.opts.Now())
	}
	if !ready {
		writeText(w, http.StatusServiceUnavailable, string(reason))
		return
	}
	writeText(w, http.StatusOK, "ready")
}

// status answers the Document as indented JSON, always 200 (readiness is
// inside the document).
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	doc := Build(s.opts.Store.Load(), s.opts.Now())
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		s.opts.Log.WithError(err).Error("status: encode document")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// drainHandler drains or undrains the instance and answers the status
// document's drained field as JSON: {"drained": true}. Over HTTP a
// request that proved no identity is refused with 403 and logged (issue
// 28: never unauthenticated, even on loopback).
func (s *Server) drainHandler(drain, overSocket bool) http.Handler {
	action := map[bool]string{true: "drain", false: "undrain"}[drain]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var by Requester
		if overSocket {
			by, _ = socketPeer(r)
			by.Socket = true
		} else {
			user, ok := weblisten.User(r)
			if !ok {
				s.opts.Log.WithFields(logrus.Fields{"remote": r.RemoteAddr, "request": action}).
					Warn("admin: refused an unauthenticated " + action + " request over HTTP")
				writeText(w, http.StatusForbidden, action+" over HTTP needs authentication: "+socketHint(s.opts.Socket))
				return
			}
			by = Requester{Remote: r.RemoteAddr, User: user}
		}
		if s.opts.Drain == nil {
			writeText(w, http.StatusServiceUnavailable, "drain is not available in this process")
			return
		}
		if err := s.opts.Drain(drain, by); err != nil {
			s.opts.Log.WithError(err).WithFields(by.Fields()).Warn("admin: " + action + " request failed")
			writeText(w, http.StatusConflict, err.Error())
			return
		}
		body, _ := json.Marshal(api.DrainState{Drained: drain})
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(body, '\n'))
	})
}

// writeText writes a short text/plain body without a trailing newline, so
// probes can compare the body exactly.
func writeText(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
