package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/test/xlbproc"
)

// env is what every measurement shares: the options, a scratch directory,
// a private bpffs for the daemon's state_dir, the daemon binary and the
// results directory.
type env struct {
	opts      options
	tmp       string
	bpffs     string
	xlbBinary string
	out       string
	files     int // the descriptor limit this process and its children run with
}

// newEnv makes the scratch directory, mounts the private bpffs and builds
// (or finds, XLB_BINARY) the daemon. close undoes it.
func newEnv(o options) (*env, error) {
	tmp, err := os.MkdirTemp("", "xlb-bench-peers-")
	if err != nil {
		return nil, err
	}
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return nil, err
	}
	e := &env{opts: o, tmp: tmp, out: o.Out, files: int(l.Cur)}
	e.bpffs = filepath.Join(tmp, "bpffs")
	if err := os.Mkdir(e.bpffs, 0o700); err != nil {
		return nil, errors.Join(err, e.close())
	}
	if err := unix.Mount("bpf", e.bpffs, "bpf", 0, "mode=0700"); err != nil {
		e.bpffs = ""
		return nil, errors.Join(fmt.Errorf("mount a private bpffs: %w", err), e.close())
	}
	if e.xlbBinary, err = xlbproc.Build(tmp); err != nil {
		return nil, errors.Join(err, e.close())
	}
	return e, nil
}

// close unmounts the bpffs and removes the scratch directory.
func (e *env) close() error {
	var err error
	if e.bpffs != "" {
		err = unix.Unmount(e.bpffs, unix.MNT_DETACH)
	}
	return errors.Join(err, os.RemoveAll(e.tmp))
}

// saveLog keeps a log of a failed peer in the results directory's logs/.
func (e *env) saveLog(name, text string) {
	dir := filepath.Join(e.out, "logs")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
		if err == nil {
			fmt.Fprintf(os.Stderr, "benchpeers: log kept in %s\n", filepath.Join(dir, name))
		}
	}
}
