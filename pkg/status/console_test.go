package status

import (
	"regexp"
	"testing"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// TestConsoleStateClasses: the console's STATE_CLASS table (the one place
// console.js names states, pkg/status/api) gives every lifecycle and
// backend state a class, so none shows as "bad" by omission.
func TestConsoleStateClasses(t *testing.T) {
	src, err := consoleFiles.ReadFile("console/console.js")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile(`(?s)const STATE_CLASS = \{(.*?)\};`).FindSubmatch(src)
	if table == nil {
		t.Fatal("console.js has no STATE_CLASS table")
	}
	classes := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+): "(\w+)"`).FindAllSubmatch(table[1], -1) {
		classes[string(m[1])] = string(m[2])
	}
	var names []string
	for _, l := range api.Lifecycles() {
		names = append(names, string(l))
	}
	for _, b := range api.BackendStates() {
		names = append(names, string(b))
	}
	for _, n := range names {
		if c, ok := classes[n]; !ok || (c != "ok" && c != "warn" && c != "bad") {
			t.Errorf("STATE_CLASS[%q] = %q (listed %v), want ok, warn or bad", n, c, ok)
		}
	}
}
