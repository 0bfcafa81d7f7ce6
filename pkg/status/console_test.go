package status

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// TestConsoleStateClasses: the console's STATE_CLASS table (the one place
// console.js names states, pkg/status/api) gives every lifecycle, backend
// and service state a class, so none shows as "bad" by omission.
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
	for _, st := range api.ServiceStates() {
		names = append(names, string(st))
	}
	for _, n := range names {
		if c, ok := classes[n]; !ok || (c != "ok" && c != "warn" && c != "bad") {
			t.Errorf("STATE_CLASS[%q] = %q (listed %v), want ok, warn or bad", n, c, ok)
		}
	}
}

// consoleTable returns the quoted keys that open each row of the console.js
// list `const NAME = [ ["key", ...], ... ];`.
func consoleTable(t *testing.T, name string) []string {
	t.Helper()
	src, err := consoleFiles.ReadFile("console/console.js")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile(`(?s)const ` + name + ` = \[(.*?)\];`).FindSubmatch(src)
	if table == nil {
		t.Fatalf("console.js has no %s table", name)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`\["(\w+)",`).FindAllSubmatch(table[1], -1) {
		keys = append(keys, string(m[1]))
	}
	return keys
}

// jsonFields are the JSON names of a struct type's fields.
func jsonFields(v any) map[string]bool {
	fields := map[string]bool{}
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	return fields
}

// TestConsoleCounterNames: the refused-SYN reasons and XDP verdicts the
// console shows are fields of the status document (api.Counters,
// api.XDPActions), and every verdict is shown.
func TestConsoleCounterNames(t *testing.T) {
	counters := jsonFields(api.Counters{})
	refused := consoleTable(t, "REFUSED")
	if len(refused) != 4 {
		t.Errorf("REFUSED lists %v, want the 4 refusal counters", refused)
	}
	for _, k := range refused {
		if !counters[k] {
			t.Errorf("REFUSED names %q, not a field of dataplane.counters", k)
		}
	}
	actions := jsonFields(api.XDPActions{})
	verdicts := consoleTable(t, "VERDICTS")
	for _, k := range verdicts {
		if !actions[k] {
			t.Errorf("VERDICTS names %q, not a field of dataplane.counters.xdp_actions", k)
		}
		delete(actions, k)
	}
	if len(actions) > 0 {
		t.Errorf("VERDICTS leaves out %v", actions)
	}
}
