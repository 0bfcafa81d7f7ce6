package main

import (
	"strings"
	"testing"
)

// TestInPlace: a frame overwrites the last from the cursor's home, erases
// each line's tail and the screen below, never the whole screen, and on a
// terminal of N rows keeps N-1 lines so that it never scrolls.
func TestInPlace(t *testing.T) {
	frame := []byte("a\nb\nc\nd\ne\n")
	if got, want := string(inPlace(frame, 0)), "\x1b[Ha\x1b[K\nb\x1b[K\nc\x1b[K\nd\x1b[K\ne\x1b[K\n\x1b[J"; got != want {
		t.Errorf("no terminal: %q, want %q", got, want)
	}
	if got, want := string(inPlace(frame, 6)), string(inPlace(frame, 0)); got != want {
		t.Errorf("6 rows, 5 lines: %q, want it whole %q", got, want)
	}
	got := string(inPlace(frame, 4))
	if want := "\x1b[Ha\x1b[K\nb\x1b[K\n... 3 more lines: enlarge the terminal\x1b[K\n\x1b[J"; got != want {
		t.Errorf("4 rows: %q, want %q", got, want)
	}
	if n := strings.Count(got, "\n"); n != 3 {
		t.Errorf("4 rows: %d newlines, want 3", n)
	}
}
