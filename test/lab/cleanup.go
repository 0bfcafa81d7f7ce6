package lab

import "github.com/xlbproject/xlb/internal/testnet"

// CleanupStale removes leftovers of labs whose prefix starts with prefix
// (testnet.CleanupStale).
func CleanupStale(prefix string) error { return testnet.CleanupStale(prefix) }

// CloseOnSignal makes SIGINT and SIGTERM run the functions before in
// order (e.g. stop the daemon under test), close the lab, and exit the
// process with status 128+signal (testnet.CloseOnSignal). Call the
// returned stop function once the signal no longer needs handling.
func (l *Lab) CloseOnSignal(before ...func()) (stop func()) {
	return testnet.CloseOnSignal(l.Close, before...)
}
