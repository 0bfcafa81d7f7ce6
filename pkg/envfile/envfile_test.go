package envfile

import (
	"reflect"
	"testing"
)

// Each case is what systemd's EnvironmentFile= makes of the text
// (systemd.exec(5), src/basic/env-file.c).
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		vars       []Var
		ignored    []Ignored
	}{
		{"plain", "A=1\nB=two words\n", []Var{{"A", "1", 1}, {"B", "two words", 2}}, nil},
		{"comments and blanks", "# c\n\n  ; c\nA=1 # not a comment\n", []Var{{"A", "1 # not a comment", 4}}, nil},
		{"blanks around", "  A  =   v  \t\n", []Var{{"A", "v", 1}}, nil},
		{"empty", "A=\nB=  \n", []Var{{"A", "", 1}, {"B", "", 2}}, nil},
		{"no final newline", "A=1", []Var{{"A", "1", 1}}, nil},
		{"single quotes keep everything", `A='p"a\ss '` + "\n", []Var{{"A", `p"a\ss `, 1}}, nil},
		{"double quotes escape four characters", `A="q\"b\\s\$d\x e "` + "\n", []Var{{"A", `q"b\s$d\x e `, 1}}, nil},
		{"unquoted backslash", `A=a\"b\\c` + "\n", []Var{{"A", `a"b\c`, 1}}, nil},
		{"parts after a quote join", `A="a" 'b c'd` + "\n", []Var{{"A", "ab cd", 1}}, nil},
		{"quotes inside an unquoted value stay", `A=a"b c"'d'` + "\n", []Var{{"A", `a"b c"'d'`, 1}}, nil},
		{"continuation", "A=one\\\ntwo\nB=\"x\\\ny\"\n", []Var{{"A", "onetwo", 1}, {"B", "xy", 3}}, nil},
		{"multi-line double quotes", "A=\"x\ny\"\nB=1\n", []Var{{"A", "x\ny", 1}, {"B", "1", 3}}, nil},
		{"CRLF", "A=1\r\nB=2\r\n", []Var{{"A", "1", 1}, {"B", "2", 2}}, nil},
		{"ignored lines", "junk\nexport A=1\n1X=2\nB=3\n", []Var{{"B", "3", 4}},
			[]Ignored{{1, `"junk" has no '='`}, {2, `"export A" is not a valid variable name`}, {3, `"1X" is not a valid variable name`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Parse(tc.text)
			if !reflect.DeepEqual(f.Vars, tc.vars) || !reflect.DeepEqual(f.Ignored, tc.ignored) {
				t.Errorf("Parse(%q):\n vars %+v\n ignored %+v\nwant\n vars %+v\n ignored %+v", tc.text, f.Vars, f.Ignored, tc.vars, tc.ignored)
			}
		})
	}
}

func TestLookupTakesTheLast(t *testing.T) {
	f := Parse("A=1\nB=x\nA=2\n")
	if v, line, ok := f.Lookup("A"); v != "2" || line != 3 || !ok {
		t.Errorf("Lookup(A) = %q, %d, %v", v, line, ok)
	}
	if _, _, ok := f.Lookup("C"); ok {
		t.Error("Lookup(C) found")
	}
}
