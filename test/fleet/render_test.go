package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/envfile"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// trickyValues are environment values that systemd's EnvironmentFile=
// parsing changes unless they are quoted right: quotes, backslashes,
// shell expansions, blanks at either end, comment characters, a newline.
// (A value with "{{" or "{%" is an Ansible template: mark it !unsafe.)
var trickyValues = []string{
	`p"a'ss\w$o rd#1`,
	"`id` $(id) ${HOME} $HOME $",
	`\`, `\\`, `"`, `'`, `''`, `""`, `\"`, `\$`,
	"  leading and trailing blanks  ",
	"#not a comment", ";nor this", "a=b=c",
	"tab\there", "two\nlines", `trailing backslash\`,
	"ümlaut €",
}

// renderRole runs testdata/render.yml (the role's preflight, then its
// rendering and `xlb check --env-file` of the environment file and
// xlb.yaml, tasks/render.yml) on the controller with the given role
// variables, checking with the xlb binary at xlb. It returns the output
// and the directory holding the rendered env and xlb.yaml.
func renderRole(t *testing.T, xlb string, vars map[string]any) (string, string, error) {
	t.Helper()
	work := t.TempDir()
	out := filepath.Join(work, "rendered")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	all := map[string]any{"xlb_render_dir": out, "xlb_binary": xlb}
	for k, v := range vars {
		all[k] = v
	}
	o, err := runTestPlaybook(t, "render.yml", work, all)
	return o, out, err
}

// buildXLB builds the daemon (or takes XLB_BINARY) for the role's check.
func buildXLB(t *testing.T) string {
	t.Helper()
	requireTools(t, "ansible-playbook")
	xlb, err := xlbproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return xlb
}

// TestRoleEnvFile renders the role's environment file with tricky values
// in every place a value goes (the admin password, ARGS, xlb_environment)
// and reads it back with pkg/envfile, which parses env files as systemd
// 252 does: every value arrives unchanged, no line is ignored, and `xlb
// check --env-file` accepts the pair. A POSIX shell that sources the file
// gets the same values.
func TestRoleEnvFile(t *testing.T) {
	xlb := buildXLB(t)
	env := map[string]string{}
	for i, v := range trickyValues {
		env[fmt.Sprintf("FLEET_VALUE_%02d", i)] = v
	}
	password := trickyValues[0] + " " + trickyValues[1]
	args := "--log.level=debug --log.format=json"
	out, dir, err := renderRole(t, xlb, map[string]any{
		"xlb_admin_username": "operator",
		"xlb_admin_password": password,
		"xlb_args":           args,
		"xlb_environment":    env,
	})
	if err != nil {
		t.Fatalf("render.yml: %v\n%s", err, Tail(out, 40))
	}
	if st := TaskStatus(out, "Check the environment file and xlb.yaml together (xlb check --env-file)", "localhost"); st != "ok" {
		t.Errorf("xlb check --env-file: %q, want ok\n%s", st, Tail(out, 40))
	}
	f, err := envfile.Load(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Ignored) > 0 {
		t.Errorf("lines systemd would ignore: %+v", f.Ignored)
	}
	want := map[string]string{"XLB_ADMIN_PASSWORD": password, "ARGS": args, "XLB_RESTART_ON_UPGRADE": "no"}
	for k, v := range env {
		want[k] = v
	}
	for name, v := range want {
		got, line, ok := f.Lookup(name)
		if !ok || got != v {
			t.Errorf("%s (line %d, set %v): systemd reads %q, want %q", name, line, ok, got, v)
		}
		sh, err := exec.Command("sh", "-c", `set -a; . "$1"; printf '%s' "$(printenv "$2"; echo x)"`, "sh",
			filepath.Join(dir, "env"), name).Output()
		if got := strings.TrimSuffix(strings.TrimSuffix(string(sh), "x"), "\n"); err != nil || got != v {
			t.Errorf("%s: a shell that sources the file reads %q (%v), want %q", name, got, err, v)
		}
	}
	if len(f.Vars) != len(want) {
		t.Errorf("%d assignments, want %d: %+v", len(f.Vars), len(want), f.Vars)
	}
}

// TestRoleRejects: what would stop xlb on every host stops the role
// first, on the controller here and on every host in site.yml's first
// play. A username without a password, or no package checksum, fails
// the preflight; the same files without the preflight fail `xlb check
// --env-file`, as does an unknown XLB_DISABLE_FEATURES; nothing is
// rendered past the check.
func TestRoleRejects(t *testing.T) {
	xlb := buildXLB(t)
	for _, c := range []struct {
		name      string
		vars      map[string]any
		task, msg string
	}{
		{"username without password: preflight", map[string]any{"xlb_admin_username": "operator"},
			"Check the admin listener's settings", "xlb_admin_password is empty"},
		{"username without password: xlb check", map[string]any{"xlb_admin_username": "operator", "render_preflight": false},
			"Stop at a rejected environment file or xlb.yaml (nothing was installed)", "XLB_ADMIN_PASSWORD"},
		{"unknown feature: xlb check", map[string]any{"xlb_environment": map[string]string{"XLB_DISABLE_FEATURES": "no-such-feature"}},
			"Stop at a rejected environment file or xlb.yaml (nothing was installed)", "no-such-feature"},
		{"environment name: preflight", map[string]any{"xlb_environment": map[string]string{"NOT-A-NAME": "x"}},
			"Check the environment file's variables", "environment variable names"},
		{"no package checksum: preflight", map[string]any{"xlb_package_sha256": ""},
			"Check the package settings", "no package is installed unchecked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := renderRole(t, xlb, c.vars)
			if err == nil {
				t.Fatalf("render.yml succeeded, want it to fail at %q\n%s", c.task, Tail(out, 30))
			}
			if st := TaskStatus(out, c.task, "localhost"); st != "fatal" {
				t.Errorf("%q: %q, want fatal\n%s", c.task, st, Tail(out, 30))
			}
			if !strings.Contains(strings.Join(strings.Fields(out), " "), c.msg) {
				t.Errorf("output lacks %q\n%s", c.msg, Tail(out, 30))
			}
			t.Logf("%s", failureLine(out))
		})
	}
}

// failureLine is the message of the first failed task in a playbook's
// output, for the log.
func failureLine(out string) string {
	i := strings.Index(out, "fatal: [")
	if i < 0 {
		return ""
	}
	msg, _, _ := strings.Cut(out[i:], "\n\n")
	return strings.Join(strings.Fields(msg), " ")
}
