package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/hostnet"
)

// The environment of a hot upgrade's successor (issue 28, item 6).
//
// systemd reads a unit's EnvironmentFile= files (and applies its
// Environment= lines) afresh for every process it starts, ExecReload= as
// much as ExecStart=; the main process keeps the environment it started
// with. So the process that has the unit's current environment is
// `xlb reload` (ExecReload=), not the running daemon. With
// --pass-environment it writes its environment for the daemon it signals
// (reloadEnvPath, 0600 in the root-only runtime directory, removed again
// as soon as the hand-off is decided), and the daemon starts its
// successor with it: a rotated XLB_ADMIN_PASSWORD, a BGP password_env
// variable or a changed ARGS takes effect with `systemctl reload xlb`,
// without a restart.
//
// This is more robust than having the successor re-read the files the
// unit names: it gets exactly what systemd computed, from every
// EnvironmentFile= and Environment= line of the unit and its drop-ins
// (after `systemctl daemon-reload`), in systemd's own syntax and order,
// and a variable deleted from a file is gone too, which no re-reading
// of a fixed list of files would get right.
//
// A few variables describe a process, not the unit; the successor takes
// those from the running daemon (processVars). ARGS is spliced into the
// command line: the unit's ExecStart= ends with $ARGS, which systemd
// split into words when it started the daemon, so the words of the old
// ARGS at the end of the daemon's arguments are replaced with the words
// of the new one (successorArgs).

// capReloadEnvironment: the daemon starts its hot-upgrade successor with
// the environment `xlb reload --pass-environment` hands it (issue 28).
const capReloadEnvironment = "reload-environment"

// envARGS is the variable of extra command line flags (the unit's
// ExecStart= ends with $ARGS; packaging/default).
const envARGS = "ARGS"

// processVars are the variables systemd (or the daemon itself) sets for
// one process rather than for the unit: the successor keeps the running
// daemon's (it inherits its journal stream, notify socket and watchdog),
// never `xlb reload`'s. MAINPID is set for control processes only.
var processVars = []string{
	"MAINPID", "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC",
	"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
	"JOURNAL_STREAM", "SYSTEMD_EXEC_PID", "INVOCATION_ID",
	envHandOff,
}

// reloadEnvPath is where `xlb reload --pass-environment` leaves the
// environment for the daemon with this pid: beside its result, in the
// runtime directory (0700, root; the unit's RuntimeDirectory=).
func reloadEnvPath(pid int) string {
	return filepath.Join(hostnet.DefaultJournalDir, fmt.Sprintf("hot-upgrade-env-%d.json", pid))
}

// writeReloadEnv leaves env for the daemon pid (atomically, mode 0600).
func writeReloadEnv(pid int, env []string) error {
	path := reloadEnvPath(pid)
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		os.Remove(path + ".tmp")
		return err
	}
	return nil
}

// reloadEnvMaxAge is the age beyond which an environment left for a
// process is not used: `xlb reload` signals right after writing it and
// removes it when it stops waiting (80 s at most), so an older one was
// left by a reload that was killed, and a later SIGUSR2 is not its.
const reloadEnvMaxAge = 2 * time.Minute

// takeReloadEnv reads and removes the environment `xlb reload` left for
// the daemon pid; ok is false when there is none (a SIGUSR2 from
// elsewhere, or `xlb reload` without --pass-environment) or it is older
// than reloadEnvMaxAge.
func takeReloadEnv(pid int) (env []string, ok bool, err error) {
	path := reloadEnvPath(pid)
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	b, err := os.ReadFile(path)
	os.Remove(path)
	if err != nil {
		return nil, false, err
	}
	if time.Since(st.ModTime()) > reloadEnvMaxAge {
		return nil, false, nil
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, false, fmt.Errorf("the environment from xlb reload (%s): %w", path, err)
	}
	return env, true, nil
}

// envMap is an environment list as a map (a later assignment wins, as in
// os.Getenv); entries without '=' are left out.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// successorEnv is the environment of the successor: the unit's fresh
// environment (from `xlb reload`) with the process variables of the
// running daemon (own), then the hand-off marker. changed lists the names
// (never the values) of the variables that differ from own, sorted,
// process variables left out.
func successorEnv(own, fresh []string) (env []string, changed []string) {
	o, f := envMap(own), envMap(fresh)
	for _, kv := range fresh {
		if k, _, ok := strings.Cut(kv, "="); ok && !slices.Contains(processVars, k) {
			env = append(env, kv)
		}
	}
	for _, k := range processVars {
		if v, ok := o[k]; ok && k != envHandOff {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, envHandOff+"=1")
	for k, v := range f {
		if ov, ok := o[k]; (!ok || ov != v) && !slices.Contains(processVars, k) {
			changed = append(changed, k)
		}
	}
	for k := range o {
		if _, ok := f[k]; !ok && !slices.Contains(processVars, k) {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	return env, changed
}

// successorArgs is the successor's command line (without the program
// name) when ARGS changed from oldARGS to newARGS: args, whose last words
// are oldARGS's words (systemd's $ARGS at the end of ExecStart=), with
// those replaced by newARGS's. ok is false when args does not end with
// oldARGS's words (the daemon was not started by the unit's ExecStart=):
// args is then returned unchanged.
func successorArgs(args []string, oldARGS, newARGS string) (out []string, ok bool) {
	oldW := splitARGS(oldARGS)
	if len(oldW) > len(args) || !slices.Equal(args[len(args)-len(oldW):], oldW) {
		return args, false
	}
	out = append(slices.Clone(args[:len(args)-len(oldW)]), splitARGS(newARGS)...)
	return out, true
}

// splitARGS splits a variable into words as systemd does for a lone $VAR
// word of an Exec*= line (systemd.service(5), "Command lines": split at
// whitespace; extract_first_word with EXTRACT_UNQUOTE|EXTRACT_RELAX):
// 'single' and "double" quotes group words and are removed, a backslash
// takes the next character literally (inside quotes too), and an
// unfinished quote or escape ends the last word.
func splitARGS(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	escape := false
	for _, c := range s {
		switch {
		case escape:
			w.WriteRune(c)
			escape = false
		case c == '\\':
			escape, inWord = true, true
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case strings.ContainsRune(" \t\n\r", c):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// successorCommand is the successor's environment and arguments (without
// the program name): the unit's current environment when `xlb reload
// --pass-environment` left one for this process (reload_env.go), with
// the ARGS words of the command line replaced when ARGS changed; else
// this process's own environment and arguments.
func (d *runner) successorCommand() (env, args []string, err error) {
	own, args := os.Environ(), os.Args[1:]
	fresh, ok, err := takeReloadEnv(os.Getpid())
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		d.log.Info("hot upgrade: the new process keeps this process's environment (none came from `xlb reload --pass-environment`)")
		return append(own, envHandOff+"=1"), args, nil
	}
	env, changed := successorEnv(own, fresh)
	oldARGS, newARGS := os.Getenv(envARGS), envMap(fresh)[envARGS]
	if oldARGS != newARGS {
		a, ok := successorArgs(args, oldARGS, newARGS)
		if ok {
			args = a
		} else {
			d.log.WithFields(logrus.Fields{"args": strings.Join(args, " "), "old_ARGS": oldARGS}).
				Warn("hot upgrade: ARGS changed, but this process's command line does not end with the old ARGS (not started by the unit's ExecStart=... $ARGS): the new process keeps this command line; restart xlb to apply ARGS")
		}
	}
	d.log.WithFields(logrus.Fields{"changed_variables": strings.Join(changed, ","), "args": strings.Join(args, " ")}).
		Info("hot upgrade: the new process gets the unit's current environment from `xlb reload`")
	return env, args, nil
}
