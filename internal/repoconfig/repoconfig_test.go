package repoconfig

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	c, err := Parse([]byte("targets:\n  - name: prod\n    overlay: ./clusters/prod/\n  - name: staging\n    overlay: clusters/staging\n    environment: stage\n    namespace: apps\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "prod", Overlay: "clusters/prod", Environment: "prod", Namespace: "default"},
		{Name: "staging", Overlay: "clusters/staging", Environment: "stage", Namespace: "apps"},
	}
	for i, w := range want {
		if c.Targets[i] != w {
			t.Errorf("target %d = %+v, want %+v", i, c.Targets[i], w)
		}
	}
	if got := c.TargetsOf("clusters/prod"); len(got) != 1 || got[0].Name != "prod" {
		t.Errorf("TargetsOf = %+v", got)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "list at least one target"},
		{"unknown field", "targets:\n  - name: a\n    overlay: o\n    namspace: x\n", "field namspace not found"},
		{"no overlay", "targets:\n  - name: a\n", "targets[0].overlay: required"},
		{"outside", "targets:\n  - name: a\n    overlay: ../x\n", "inside the repository"},
		{"duplicate", "targets:\n  - name: a\n    overlay: x\n  - name: A\n    overlay: y\n", `targets[1].name: "A" is also targets[0]`},
		{"bad namespace", "targets:\n  - name: a\n    overlay: x\n    namespace: Not_OK\n", "targets[0].namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), File) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, File, tc.want)
			}
		})
	}
}
