package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// AnsibleDir is the repository's ansible/ directory.
func AnsibleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("fleet: cannot locate the repository")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "ansible"))
}

// labConnectionPlugins is the directory of the lab's connection plugin,
// nsenter_pipelining (testdata/plugins/connection): community.docker.nsenter
// with pipelining, which that plugin's way of running commands supports
// but does not declare.
func labConnectionPlugins() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("fleet: cannot locate the test's directory")
	}
	return filepath.Join(filepath.Dir(file), "testdata", "plugins", "connection"), nil
}

// Inventory writes an inventory for the lab to path: group "xlb" (the
// containers, through nsenter_pipelining — community.docker.nsenter with
// pipelining — into their PID 1) and group "upstream" (the router,
// through the same plugin into the holder process in its namespace),
// with vars for group xlb.
func (l *Lab) Inventory(path string, vars map[string]any) error {
	hosts := map[string]any{}
	for _, h := range l.Hosts {
		hosts[h.Inventory] = map[string]any{
			"ansible_nsenter_pid": h.Container.PID1,
			"xlb_host_address":    h.Addr.String(),
			"xlb_snat_ip":         h.Addr.String(),
		}
	}
	inv := map[string]any{
		"all": map[string]any{
			"vars": map[string]any{
				"ansible_connection":         "nsenter_pipelining",
				"ansible_python_interpreter": "/usr/bin/python3",
				// The plugin always runs as root; there is no sudo inside.
				"ansible_become": false,
			},
			"children": map[string]any{
				"xlb": map[string]any{"hosts": hosts, "vars": vars},
				"upstream": map[string]any{"hosts": map[string]any{
					"router": map[string]any{"ansible_nsenter_pid": l.HolderPID},
				}},
			},
		},
	}
	b, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Recap is one host's line of the PLAY RECAP.
type Recap struct {
	OK, Changed, Unreachable, Failed, Skipped, Rescued, Ignored int
}

// Result is one ansible-playbook run.
type Result struct {
	Args     []string
	Output   string
	Recap    map[string]Recap
	Duration time.Duration
	CPU      time.Duration // user and system time, children included
	Err      error         // non-nil when ansible-playbook exited non-zero
}

var recapRE = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)`)

func parseRecap(out string) map[string]Recap {
	m := map[string]Recap{}
	for _, g := range recapRE.FindAllStringSubmatch(out, -1) {
		n := make([]int, 7)
		for i := range n {
			n[i], _ = strconv.Atoi(g[i+2])
		}
		m[g[1]] = Recap{n[0], n[1], n[2], n[3], n[4], n[5], n[6]}
	}
	return m
}

// Playbook runs ansible-playbook on playbooks/NAME from the ansible
// directory with the given inventory, extra vars (written to a file next
// to the inventory) and further arguments. The output is also written to
// logPath.
//
// The lab's settings, on top of ansible.cfg (pipelining): the connection
// plugin nsenter_pipelining (labConnectionPlugins), and facts gathered
// once per host and kept (gathering "smart", the jsonfile cache in
// "facts" next to the inventory): later runs on the same hosts do not
// gather them again. Result.CPU is the run's CPU time with its children
// (the modules on the hosts, entered by nsenter, included): a measure
// that does not depend on what else the machine runs.
func Playbook(ctx context.Context, inventory, name string, extra map[string]any, logPath string, args ...string) Result {
	dir, err := AnsibleDir()
	if err != nil {
		return Result{Err: err}
	}
	plugins, err := labConnectionPlugins()
	if err != nil {
		return Result{Err: err}
	}
	argv := []string{"-i", inventory, filepath.Join("playbooks", name)}
	if len(extra) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			return Result{Err: err}
		}
		ev := strings.TrimSuffix(logPath, ".log") + ".vars.json"
		if err := os.WriteFile(ev, b, 0o644); err != nil {
			return Result{Err: err}
		}
		argv = append(argv, "-e", "@"+ev)
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "ansible-playbook", argv...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(os.Environ()),
		"ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"),
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_FORCE_COLOR=0",
		"ANSIBLE_HOST_KEY_CHECKING=0",
		"ANSIBLE_CONNECTION_PLUGINS="+plugins,
		"ANSIBLE_GATHERING=smart",
		"ANSIBLE_CACHE_PLUGIN=jsonfile",
		"ANSIBLE_CACHE_PLUGIN_CONNECTION="+filepath.Join(filepath.Dir(inventory), "facts"),
		"PYTHONUNBUFFERED=1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	r := Result{Args: append([]string{"ansible-playbook"}, argv...), Output: out.String(), Duration: time.Since(start)}
	if cmd.ProcessState != nil {
		r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		r.Err = fmt.Errorf("%s: %w", strings.Join(r.Args, " "), err)
	}
	r.Recap = parseRecap(r.Output)
	if logPath != "" {
		os.WriteFile(logPath, out.Bytes(), 0o644)
	}
	return r
}

// cleanEnv drops make's variables (a make jobserver must not leak into
// the tools) and any ANSIBLE_ settings of the caller.
func cleanEnv(env []string) []string {
	var out []string
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		switch {
		case name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL", name == "MAKEOVERRIDES":
			continue
		case strings.HasPrefix(name, "ANSIBLE_"):
			continue
		}
		out = append(out, e)
	}
	return out
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SummaryBlock returns the last rollout summary table printed by the
// playbook (the debug output of the role's report.yml), or "".
func SummaryBlock(out string) string {
	i := strings.LastIndex(out, "VERSION BEFORE  VERSION AFTER")
	if i < 0 {
		return ""
	}
	start := strings.LastIndex(out[:i], "\n") + 1
	end := strings.Index(out[i:], "\n\n")
	if end < 0 {
		end = len(out) - i
	}
	return out[start : i+end]
}

// TaskStatus returns host's status line for the last run of the task
// named name in a playbook's output ("changed", "ok", "skipping", "fatal",
// or "" when the task did not run for host).
func TaskStatus(out, name, host string) string {
	status := ""
	blocks := strings.Split(out, "\nTASK [")
	for _, b := range blocks {
		if !strings.HasPrefix(b, "xlb : "+name+"]") {
			continue
		}
		for _, line := range strings.Split(b, "\n") {
			for _, st := range []string{"changed", "ok", "skipping", "fatal"} {
				// "ok: [xlb1]", or "ok: [xlb1 -> router]" when delegated
				if strings.HasPrefix(line, st+": ["+host+"]") || strings.HasPrefix(line, st+": ["+host+" -> ") {
					status = st
				}
			}
		}
	}
	return status
}

// ReportEntry is one host of the change report (xlb_upgrade_report_file):
// the rolling upgrade's, or site.yml's for running hosts it changed.
type ReportEntry struct {
	Host           string   `json:"host"`
	Address        string   `json:"address"`
	Target         string   `json:"target"`
	Result         string   `json:"result"`
	Step           string   `json:"step"`
	Method         string   `json:"method"`  // reload, restart, or - (no swap): what the host got
	Changes        []string `json:"changes"` // what it had not taken: package, config(KEYS), environment, recover, undrain
	VersionBefore  string   `json:"version_before"`
	VersionAfter   string   `json:"version_after"`
	XDP            []string `json:"xdp"`
	Drained        bool     `json:"drained"`
	DrainedSeconds float64  `json:"drained_seconds"`
	ActiveAtStop   *int     `json:"active_at_stop"`
	Message        string   `json:"message"`
}

// ReadReport reads a rollout report.
func ReadReport(path string) ([]ReportEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r []ReportEntry
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
