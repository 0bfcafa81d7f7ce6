package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ANSI (ECMA-48) control sequences top draws with.
const (
	cursorHome  = "\x1b[H" // CUP: to row 1, column 1
	clearToEOL  = "\x1b[K" // EL 0: erase to the end of the line
	clearToEOS  = "\x1b[J" // ED 0: erase to the end of the screen
	moreMessage = "... %d more lines: enlarge the terminal"
)

// inPlace turns a frame of text lines into one that overwrites the
// previous frame: cursor home, every line erased to its end after its
// text, and the rest of the screen erased after the last. Nothing is
// cleared before the text is written (no flicker) and the whole screen is
// never erased, which some terminals (VTE) would push into the
// scrollback. With rows > 1 (the terminal's height) the frame keeps at
// most rows-1 lines, the last saying how many it left out, so the newline
// after the last line leaves the cursor on the bottom row and the terminal
// never scrolls.
func inPlace(frame []byte, rows int) []byte {
	lines := bytes.Split(bytes.TrimSuffix(frame, []byte("\n")), []byte("\n"))
	if rows > 1 && len(lines) > rows-1 {
		left := len(lines) - (rows - 2)
		lines = append(lines[:rows-2:rows-2], fmt.Appendf(nil, moreMessage, left))
	}
	var b bytes.Buffer
	b.WriteString(cursorHome)
	for _, l := range lines {
		b.Write(l)
		b.WriteString(clearToEOL + "\n")
	}
	b.WriteString(clearToEOS)
	return b.Bytes()
}

// termRows is the height of the terminal w writes to, 0 when w is not a
// terminal (a pipe, a file, a test's buffer).
func termRows(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Row)
}
