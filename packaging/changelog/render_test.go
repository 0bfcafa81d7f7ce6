package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The repository's changelog is valid and a snapshot of it renders.
func TestRepositoryChangelog(t *testing.T) {
	src, err := os.ReadFile("../changelog.yml")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Parse(src)
	if err != nil {
		t.Fatalf("packaging/changelog.yml: %v", err)
	}
	b := Build{Version: "0.0.0~git20261130.000000.0123abc", Release: "1", Date: time.Unix(1796000400, 0).UTC(), Packager: "T <t@example.invalid>"}
	out, err := Render(entries, b)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Semver != b.Version+"-1" || !out[0].Date.Equal(b.Date) || out[0].Packager != b.Packager {
		t.Errorf("first entry %+v, want %s-1 dated %s by %s", out[0], b.Version, b.Date, b.Packager)
	}
}

// release is an entry of a released version in packaging/changelog.yml's form.
func release(semver, date, note string) string {
	return "- semver: " + semver + "\n  date: " + date + "\n  packager: P\n  changes:\n    - note: \"" + note + "\"\n"
}

var twoReleases = "- semver: unreleased\n  packager: P\n  changes:\n    - note: next\n" +
	release("1.1.0", "2026-12-01T00:00:00Z", "second") +
	release("1.1.0~rc.1", "2026-11-20T00:00:00Z", "candidate") +
	release("1.0.0", "2026-11-01T00:00:00Z", "first")

func TestRender(t *testing.T) {
	entries, err := Parse([]byte(twoReleases))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		version string
		want    []string // semvers, newest first
		notes   string   // the first entry's first note
		err     string
	}{
		{version: "1.1.0", want: []string{"1.1.0-1", "1.1.0~rc.1-1", "1.0.0-1"}, notes: "second"},
		{version: "1.0.0", want: []string{"1.0.0-1"}, notes: "first"},
		{version: "1.1.0+git3.abc1234", want: []string{"1.1.0+git3.abc1234-1", "1.1.0-1", "1.1.0~rc.1-1", "1.0.0-1"}, notes: "next"},
		{version: "0.0.1~hostlab.1", want: []string{"0.0.1~hostlab.1-1", "1.1.0-1", "1.1.0~rc.1-1", "1.0.0-1"}, notes: "next"},
		{version: "1.2.0", err: "no entry for release 1.2.0"},
		{version: "1.2.0~rc.1", err: "no entry for release 1.2.0~rc.1"},
	}
	for _, c := range cases {
		out, err := Render(entries, Build{Version: c.version, Release: "1", Date: at, Packager: "B <b@example.invalid>"})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.version, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.version, err)
			continue
		}
		var got []string
		for _, e := range out {
			got = append(got, e.Semver)
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") || out[0].Changes[0].Note != c.notes {
			t.Errorf("%s: %v (first note %q), want %v (%q)", c.version, got, out[0].Changes[0].Note, c.want, c.notes)
		}
	}
	// Without an unreleased entry a snapshot still says what it is.
	out, err := Render(entries[1:], Build{Version: "1.1.0+git1.abc1234", Release: "1", Date: at, Packager: "B"})
	if err != nil || out[0].Changes[0].Note != "snapshot build: no changes recorded since 1.1.0" {
		t.Errorf("snapshot without unreleased changes: %v %+v", err, out)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		"empty":               "[]",
		"unknown key":         "- semver: 1.0.0\n  date: 2026-11-01T00:00:00Z\n  packager: P\n  version: 1\n  changes:\n    - note: x\n",
		"long note":           release("1.0.0", "2026-11-01T00:00:00Z", strings.Repeat("x", MaxNote+1)),
		"not a release":       release("1.0", "2026-11-01T00:00:00Z", "x"),
		"no date":             "- semver: 1.0.0\n  packager: P\n  changes:\n    - note: x\n",
		"older first":         release("1.0.0", "2026-11-01T00:00:00Z", "x") + release("1.1.0", "2026-10-01T00:00:00Z", "y"),
		"dated after above":   release("1.1.0", "2026-10-01T00:00:00Z", "x") + release("1.0.0", "2026-11-01T00:00:00Z", "y"),
		"unreleased not head": release("1.0.0", "2026-11-01T00:00:00Z", "x") + "- semver: unreleased\n  packager: P\n  changes:\n    - note: y\n",
	}
	for name, src := range cases {
		if _, err := Parse([]byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
