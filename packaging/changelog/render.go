package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Unreleased is the semver of the optional first entry of
// packaging/changelog.yml: the changes made since the last release. A
// release renames it to the release's version and sets its date.
const Unreleased = "unreleased"

// MaxNote is the longest note in characters: "  * " + note must fit the 80
// columns Debian changelogs keep to (lintian debian-changelog-line-too-long).
const MaxNote = 76

// Entry is one version in chglog's YAML form (github.com/goreleaser/chglog,
// the format nfpm renders).
type Entry struct {
	Semver   string    `yaml:"semver"`
	Date     time.Time `yaml:"date,omitempty"`
	Packager string    `yaml:"packager"`
	Deb      *Deb      `yaml:"deb,omitempty"`
	Notes    *Notes    `yaml:"notes,omitempty"`
	Changes  []Change  `yaml:"changes"`
}

// Deb holds the Debian changelog header's fields.
type Deb struct {
	Urgency       string   `yaml:"urgency"`
	Distributions []string `yaml:"distributions"`
}

// Notes is free text chglog keeps with an entry (nfpm does not render it).
type Notes struct {
	Header string `yaml:"header,omitempty"`
}

// Change is one line of an entry.
type Change struct {
	Note string `yaml:"note"`
}

// Build describes the package being built.
type Build struct {
	Version  string    // package version without the release
	Release  string    // package release (nfpm.yaml: "1")
	Date     time.Time // a snapshot entry's date (the commit time)
	Packager string    // a snapshot entry's packager
}

// releaseRE matches the versions packaging/version.sh makes of a release
// tag (v1.2.3, v1.2.3-rc.1): those need an entry of their own.
var releaseRE = regexp.MustCompile(`^([0-9]+)\.([0-9]+)\.([0-9]+)(~rc\.([0-9]+))?$`)

// Parse decodes packaging/changelog.yml and checks it: unknown keys are
// errors; only the first entry may be Unreleased; every other entry is a
// release version (X.Y.Z or X.Y.Z~rc.N) with a date, a packager and at
// least one change, newer entries first (by version and by date); every
// note is one line of at most MaxNote characters.
func Parse(src []byte) ([]Entry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var entries []Entry
	if err := dec.Decode(&entries); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, errors.New("no entries")
	}
	for i, e := range entries {
		where := fmt.Sprintf("entry %d (%s)", i+1, e.Semver)
		if e.Semver == Unreleased {
			if i != 0 {
				return nil, fmt.Errorf("%s: only the first entry may be %s", where, Unreleased)
			}
		} else {
			if !releaseRE.MatchString(e.Semver) {
				return nil, fmt.Errorf("%s: semver is neither %s nor a release version X.Y.Z or X.Y.Z~rc.N", where, Unreleased)
			}
			if e.Date.IsZero() || e.Packager == "" || len(e.Changes) == 0 {
				return nil, fmt.Errorf("%s: a release needs a date, a packager and at least one change", where)
			}
		}
		for _, c := range e.Changes {
			if c.Note == "" || strings.Contains(c.Note, "\n") || len([]rune(c.Note)) > MaxNote {
				return nil, fmt.Errorf("%s: note %q: want one line of 1 to %d characters", where, c.Note, MaxNote)
			}
		}
		if i == 0 || entries[i-1].Semver == Unreleased {
			continue
		}
		prev := entries[i-1]
		if compareRelease(prev.Semver, e.Semver) <= 0 {
			return nil, fmt.Errorf("%s: not older than the entry above it (%s): newest first", where, prev.Semver)
		}
		if e.Date.After(prev.Date) {
			return nil, fmt.Errorf("%s: dated after the entry above it (%s)", where, prev.Semver)
		}
	}
	return entries, nil
}

// Render returns the changelog of build b: the entries from b.Version's
// own entry on when there is one; otherwise, for a version that is not a
// release (a snapshot such as 0.0.0~git20261130.000000.0123abc or
// 1.2.3+git4.abc1234, or a test version), a first entry for b.Version
// dated b.Date by b.Packager listing the Unreleased entry's changes,
// followed by the releases. A release version (X.Y.Z, X.Y.Z~rc.N) without
// an entry is an error: the changelog must say what the release contains.
// Versions are rendered with the release ("1.2.3-1"), as dpkg and rpm name
// the package.
func Render(entries []Entry, b Build) ([]Entry, error) {
	var unreleased *Entry
	releases := entries
	if entries[0].Semver == Unreleased {
		unreleased, releases = &entries[0], entries[1:]
	}
	var out []Entry
	found := false
	for _, e := range releases {
		if e.Semver == b.Version {
			found = true
		}
		if found {
			out = append(out, e)
		}
	}
	if !found {
		if releaseRE.MatchString(b.Version) {
			return nil, fmt.Errorf("no entry for release %s: rename the %s entry to semver: %s and date it", b.Version, Unreleased, b.Version)
		}
		if b.Date.IsZero() {
			return nil, fmt.Errorf("snapshot %s: no date (the commit time)", b.Version)
		}
		top := Entry{Date: b.Date, Packager: b.Packager, Deb: &Deb{Urgency: "low", Distributions: []string{"unstable"}}}
		if unreleased != nil {
			top.Notes, top.Changes = unreleased.Notes, unreleased.Changes
			if unreleased.Deb != nil {
				top.Deb = unreleased.Deb
			}
		}
		if len(top.Changes) == 0 {
			since := "the first release"
			if len(releases) > 0 {
				since = releases[0].Semver
			}
			top.Changes = []Change{{Note: "snapshot build: no changes recorded since " + since}}
		}
		out = append([]Entry{top}, releases...)
		out[0].Semver = b.Version
	}
	for i := range out {
		out[i].Semver += "-" + b.Release
	}
	return out, nil
}

// Marshal encodes rendered entries for nfpm's changelog setting.
func Marshal(entries []Entry) ([]byte, error) {
	return yaml.Marshal(entries)
}

// compareRelease orders two release versions as dpkg and rpm do (a
// "~rc.N" sorts before the release): -1, 0 or 1.
func compareRelease(a, b string) int {
	ka, kb := releaseKey(a), releaseKey(b)
	for i := range ka {
		if ka[i] != kb[i] {
			if ka[i] < kb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// releaseKey: major, minor, patch, then the rc number, or the largest int
// for a final release (after every rc).
func releaseKey(v string) [4]int {
	m := releaseRE.FindStringSubmatch(v)
	var k [4]int
	for i := 0; i < 3; i++ {
		k[i], _ = strconv.Atoi(m[i+1])
	}
	k[3] = int(^uint(0) >> 1)
	if m[5] != "" {
		k[3], _ = strconv.Atoi(m[5])
	}
	return k
}
