package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/xlbproject/xlb/test/lab"
)

// browser is a headless Chromium (Debian's chromium package) driven over
// the DevTools protocol, which records every script exception and every
// console or log entry at level error (a CSP violation, a failed load).
type browser struct {
	ctx        context.Context
	mu         sync.Mutex
	exceptions []string
	errors     []string
}

// newBrowser starts Chromium until the test ends; as root it needs
// --no-sandbox. A missing chromium fails the test: CI installs it (make
// deps).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): install Debian's chromium package (make deps)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()),
		// its singleton socket directory goes to TMPDIR: the test's, not /tmp
		chromedp.Env("TMPDIR="+t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() }) // kills chromium and waits for it
	b := &browser{ctx: ctx}
	// Listen starts chromium and opens the tab; events arrive from then on.
	err = chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.exceptions = append(b.exceptions, exceptionText(e.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				b.errors = append(b.errors, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				b.errors = append(b.errors, string(e.Entry.Source)+": "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	if err == nil {
		_, err = chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	}
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

func exceptionText(d *runtime.ExceptionDetails) string {
	s := d.Text
	if d.Exception != nil {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

// problems returns the exceptions and error entries recorded so far.
func (b *browser) problems() (exceptions, errs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.exceptions...), append([]string(nil), b.errors...)
}

// do runs chromedp steps with a generous bound.
func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// waitEval evaluates expr (a JavaScript expression with a JSON value) into
// a T every 200 ms until ok accepts it, for at most 60 s, and returns it.
func waitEval[T any](t *testing.T, b *browser, what, expr string, ok func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		cancel()
		if err != nil {
			t.Fatalf("evaluate %s: %v", what, err)
		}
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %s; last: %+v", what, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// screenshot writes the whole page as a PNG named name into the artifacts
// directory ($XLB_ARTIFACTS, else test/e2e/artifacts, which git ignores:
// t.TempDir would remove it) and logs its path.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	cancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("XLB_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// nsProxy forwards connections to 127.0.0.1:<ephemeral port> on the
// test's host to addr inside h's namespace, until the test ends, and
// returns the local address: the browser runs outside the lab. A
// connection it cannot make inside is closed at once (the browser sees a
// failed fetch).
func nsProxy(t *testing.T, h *lab.Host, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				up, err := h.Dial(ctx, addr)
				cancel()
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{})
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); close(done) }()
				io.Copy(c, up)
				c.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}
