package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xlbproject/xlb/pkg/bgp"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/envfile"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// environment is the variables the service gets from its environment
// files, each with where it was set: files in order, a later assignment
// overriding an earlier one, as systemd applies EnvironmentFile= lines.
type environment struct {
	files []string
	vars  map[string]setting
}

// setting is a variable's value and the file:line that set it.
type setting struct {
	value, at string
}

// loadEnv reads the environment files. Lines systemd ignores are
// warnings; a file that cannot be read is an error (the unit's "-" prefix
// makes a missing file legal for systemd, but a check asked to read it
// should say it is not there).
func loadEnv(paths []string) (*environment, []string, error) {
	env := &environment{files: paths, vars: map[string]setting{}}
	var warnings []string
	var errs []error
	for _, p := range paths {
		f, err := envfile.Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, ig := range f.Ignored {
			warnings = append(warnings, fmt.Sprintf("%s:%d: ignored, as systemd ignores it: %s", p, ig.Line, ig.Reason))
		}
		for _, v := range f.Vars {
			env.vars[v.Name] = setting{v.Value, fmt.Sprintf("%s:%d", p, v.Line)}
		}
	}
	return env, warnings, errors.Join(errs...)
}

// check returns what in the environment would stop the daemon's start
// with cfg (read from source), one message each, naming the file and line
// of the variable or, for an unset one, the files.
func (e *environment) check(cfg *config.Config, source string) []string {
	var errs []string
	if a := cfg.Admin.Auth; a != nil {
		errs = append(errs, e.required(api.EnvAdminPassword,
			fmt.Sprintf("%s sets admin.auth.username %q, so xlb would refuse to start", source, a.Username))...)
	}
	if cfg.BGP != nil {
		for i, p := range cfg.BGP.Peers {
			if p.PasswordEnv == "" {
				continue
			}
			why := fmt.Sprintf("%s names it in bgp.peers[%d].password_env (%s), so xlb would refuse to start", source, i, p.Address)
			if errs2 := e.required(p.PasswordEnv, why); len(errs2) > 0 {
				errs = append(errs, errs2...)
				continue
			}
			if s := e.vars[p.PasswordEnv]; len(s.value) > bgp.MaxPasswordLen {
				errs = append(errs, fmt.Sprintf("%s: %s: the password is %d bytes, TCP MD5 takes at most %d", s.at, p.PasswordEnv, len(s.value), bgp.MaxPasswordLen))
			}
		}
	}
	if s, ok := e.vars[api.EnvDisableFeatures]; ok {
		if _, err := dataplane.ParseFeatures(s.value); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s: %v", s.at, api.EnvDisableFeatures, err))
		}
	}
	return errs
}

// required returns an error when name is unset or empty; why says what
// needs it.
func (e *environment) required(name, why string) []string {
	s, ok := e.vars[name]
	switch {
	case !ok:
		return []string{fmt.Sprintf("%s: %s is not set, but %s", strings.Join(e.files, ", "), name, why)}
	case s.value == "":
		return []string{fmt.Sprintf("%s: %s is empty, but %s", s.at, name, why)}
	}
	return nil
}
