package hostlab

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultCache is where root filesystems are cached when HOSTLAB_CACHE is
// not set (the Makefile sets it; see packaging/package.mk).
const DefaultCache = "/var/cache/xlb-hostlab"

// markerFile, inside a root filesystem, records how it was built.
const markerFile = "etc/xlb-hostlab-rootfs"

// DefaultMirror is used when the machine's apt sources name no mirror for
// the suite.
const DefaultMirror = "http://deb.debian.org/debian"

// RootfsSpec describes a debootstrap root filesystem. Two specs with the
// same fields share a cache entry.
type RootfsSpec struct {
	Suite   string   // "bookworm"
	Variant string   // debootstrap --variant
	Include []string // debootstrap --include
	Mirror  string   // the apt mirror
}

// DefaultSpec is a minimal Debian bookworm that boots systemd, with the
// tools the package tests use inside it: iproute2 (ip), rpm (to run the
// RPM package's scriptlets under a real systemd as well), and python3 with
// python3-apt for Ansible's apt module (test/fleet), so
// both test suites share one cached root.
func DefaultSpec() RootfsSpec {
	return RootfsSpec{
		Suite:   "bookworm",
		Variant: "minbase",
		Include: []string{"systemd", "systemd-sysv", "dbus", "iproute2", "rpm", "python3", "python3-apt"},
		Mirror:  MachineMirror("bookworm"),
	}
}

// Name is the cache entry's directory name: suite, variant and a hash of
// the whole spec.
func (s RootfsSpec) Name() string {
	h := sha256.Sum256([]byte(strings.Join([]string{s.Suite, s.Variant, strings.Join(s.Include, ","), s.Mirror}, "\n")))
	return fmt.Sprintf("%s-%s-%s", s.Suite, s.Variant, hex.EncodeToString(h[:6]))
}

// CacheDir returns HOSTLAB_CACHE, or DefaultCache.
func CacheDir() string {
	if d := os.Getenv("HOSTLAB_CACHE"); d != "" {
		return d
	}
	return DefaultCache
}

// MachineMirror returns the mirror the machine's apt sources use for suite
// (deb822 files in /etc/apt/sources.list.d/*.sources, then one-line
// sources.list entries), or DefaultMirror.
func MachineMirror(suite string) string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		if m := mirrorFromDeb822(f, suite); m != "" {
			return m
		}
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, lists...) {
		if m := mirrorFromList(f, suite); m != "" {
			return m
		}
	}
	return DefaultMirror
}

func mirrorFromDeb822(path, suite string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, stanza := range strings.Split(string(b), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, " ") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !hasWord(fields["types"], "deb") || !hasWord(fields["suites"], suite) {
			continue
		}
		if strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		if uris := strings.Fields(fields["uris"]); len(uris) > 0 {
			return uris[0]
		}
	}
	return ""
}

func mirrorFromList(path, suite string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		words := strings.Fields(sc.Text())
		if len(words) < 3 || words[0] != "deb" {
			continue
		}
		words = words[1:]
		if strings.HasPrefix(words[0], "[") { // [options]
			for len(words) > 0 && !strings.HasSuffix(words[0], "]") {
				words = words[1:]
			}
			if len(words) > 0 {
				words = words[1:]
			}
		}
		if len(words) >= 2 && words[1] == suite {
			return words[0]
		}
	}
	return ""
}

func hasWord(list, w string) bool {
	for _, x := range strings.Fields(list) {
		if x == w {
			return true
		}
	}
	return false
}

// EnsureRootfs returns the cached root filesystem for spec under cache,
// building it with debootstrap when it is missing. The build goes into a
// temporary directory next to the entry and is renamed into place only
// when complete, so an interrupted build never leaves a broken entry (its
// leftovers are removed by the next call). Concurrent callers (parallel
// test runs) serialise on a lock file; one builds, the others reuse.
// logf, if not nil, reports progress. built says whether this call ran
// debootstrap.
func EnsureRootfs(cache string, spec RootfsSpec, logf func(format string, args ...any)) (dir string, built bool, err error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", false, fmt.Errorf("hostlab: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", false, fmt.Errorf("hostlab: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", false, fmt.Errorf("hostlab: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	dir = filepath.Join(cache, spec.Name())
	// The marker is written last, inside the temporary tree before the
	// rename: present means complete.
	if _, err := os.Lstat(filepath.Join(dir, markerFile)); err == nil {
		return dir, false, nil
	}
	// Leftovers of interrupted builds (we hold the lock: nobody is building).
	stale, _ := filepath.Glob(filepath.Join(cache, ".build-*"))
	for _, s := range stale {
		logf("hostlab: removing interrupted build %s", s)
		if err := removeTree(s); err != nil {
			return "", false, err
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		// Present but incomplete (not made by this code): rebuild.
		if err := removeTree(dir); err != nil {
			return "", false, err
		}
	}
	for _, tool := range []string{"debootstrap", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", false, fmt.Errorf("hostlab: %s not installed (run `make deps`)", tool)
		}
	}
	tmp, err := os.MkdirTemp(cache, ".build-"+spec.Name()+"-")
	if err != nil {
		return "", false, fmt.Errorf("hostlab: %w", err)
	}
	start := time.Now()
	args := []string{"--variant=" + spec.Variant, "--include=" + strings.Join(spec.Include, ","), spec.Suite, tmp, spec.Mirror}
	logf("hostlab: debootstrap %s (cache %s)", strings.Join(args, " "), dir)
	out, err := exec.Command("debootstrap", args...).CombinedOutput()
	if err != nil {
		removeTree(tmp)
		return "", false, fmt.Errorf("hostlab: debootstrap: %v\n%s", err, tail(string(out), 40))
	}
	// Downloaded .debs are not needed to boot (about 70 MB).
	if out, err := exec.Command("chroot", tmp, "apt-get", "clean").CombinedOutput(); err != nil {
		removeTree(tmp)
		return "", false, fmt.Errorf("hostlab: apt-get clean in the new root: %v\n%s", err, out)
	}
	note := fmt.Sprintf("debootstrap %s\nbuilt %s in %s\n", strings.Join(args[:len(args)-2], " ")+" ROOT "+spec.Mirror, time.Now().UTC().Format(time.RFC3339), time.Since(start).Round(time.Second))
	if err := os.WriteFile(filepath.Join(tmp, markerFile), []byte(note), 0o644); err != nil {
		removeTree(tmp)
		return "", false, fmt.Errorf("hostlab: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		removeTree(tmp)
		return "", false, fmt.Errorf("hostlab: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		removeTree(tmp)
		return "", false, fmt.Errorf("hostlab: %w", err)
	}
	logf("hostlab: root filesystem built in %s", time.Since(start).Round(100*time.Millisecond))
	return dir, true, nil
}

// removeTree removes a directory tree that must not contain mount points
// (a root filesystem can have some only while a container runs on it; we
// refuse rather than delete through a mount).
func removeTree(dir string) error {
	if mounts, err := mountsUnder(dir); err != nil {
		return err
	} else if len(mounts) > 0 {
		return fmt.Errorf("hostlab: refusing to remove %s: mount points inside: %v", dir, mounts)
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostlab: %w", err)
	}
	return nil
}

// mountsUnder lists mount points of this mount namespace at or below dir.
func mountsUnder(dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("hostlab: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == abs || strings.HasPrefix(mp, abs+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
