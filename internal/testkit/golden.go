package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden compares got with the golden file path (testdata/NAME.golden by
// convention); with -update it writes got there instead.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it; review the diff):\n%s", path, diff(string(want), got))
	}
}

// Generated compares the section of file between the lines
// "<!-- BEGIN marker -->" and "<!-- END marker -->" with content; with
// -update it writes content there instead.
func Generated(t testing.TB, file, marker, content string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- BEGIN "+marker+" -->\n", "<!-- END "+marker+" -->"
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no section between %q and %q", file, strings.TrimSpace(begin), end)
	}
	old := s[i+len(begin) : j]
	if old == content {
		return
	}
	if !*update {
		t.Errorf("%s: the section %q is stale (go test -update rewrites it):\n%s", file, marker, diff(old, content))
		return
	}
	if err := os.WriteFile(file, []byte(s[:i+len(begin)]+content+s[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// diff shows where got first departs from want, with a few lines of
// context: enough to see what changed; -update and git diff show the rest.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (want %d lines, got %d):\n", i+1, len(w), len(g))
	from := max(0, i-3)
	for k := from; k < i; k++ {
		fmt.Fprintf(&b, "  %s\n", w[k])
	}
	for k := i; k < min(len(w), i+5); k++ {
		fmt.Fprintf(&b, "- %s\n", w[k])
	}
	for k := i; k < min(len(g), i+5); k++ {
		fmt.Fprintf(&b, "+ %s\n", g[k])
	}
	return b.String()
}
