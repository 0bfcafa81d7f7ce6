package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// MaxPrefixLen is the longest prefix: the longest link name, PREFIX + "-"
// + a 3-character tag, must fit Linux's 15 characters.
const MaxPrefixLen = 11

// RandomPrefix returns base followed by 6 random lowercase hex digits, a
// prefix of its own for one test, lab or demo run. base is 2 to
// MaxPrefixLen-6 characters from [a-z0-9] ("xl" for labs, "xf" for
// fleets).
func RandomPrefix(base string) (string, error) {
	if len(base) < 2 {
		return "", fmt.Errorf("testnet: prefix base %q: want at least 2 characters", base)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("testnet: random prefix: %w", err)
	}
	p := base + hex.EncodeToString(b[:])
	if err := ValidatePrefix(p); err != nil {
		return "", err
	}
	return p, nil
}

// ValidatePrefix reports whether p can start namespace and link names:
// 1…MaxPrefixLen characters from [a-z0-9].
func ValidatePrefix(p string) error {
	if p == "" || len(p) > MaxPrefixLen {
		return fmt.Errorf("testnet: prefix %q: want 1…%d characters", p, MaxPrefixLen)
	}
	for _, c := range p {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("testnet: prefix %q: only [a-z0-9] allowed", p)
		}
	}
	return nil
}
