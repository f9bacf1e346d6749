package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kplan-dev/kplan/internal/demo"
)

// --full, the default changed-only plan and a cached plan print the same.
func TestDiffFullAndCached(t *testing.T) {
	repo, err := demo.NewRepo(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	var outs []string
	for _, extra := range [][]string{{"--full"}, nil, {"--cache-dir", cache}, {"--cache-dir", cache}} {
		args := append([]string{"diff", "-C", repo.Dir, "--base", repo.Base, "--head", repo.Head, "--format", "json"}, extra...)
		out, stderr, err := kplan(t, nil, args...)
		if err != nil {
			t.Fatalf("kplan %q: %v\n%s", args, err, stderr)
		}
		outs = append(outs, withoutWork(t, out))
	}
	for i, out := range outs[1:] {
		if out != outs[0] {
			t.Errorf("plan %d differs from --full:\n%s\nwant\n%s", i+1, out, outs[0])
		}
	}
}

// withoutWork is a JSON plan without its work section: how long the plan
// took and what came from the cache differ from run to run by design.
func withoutWork(t *testing.T, out string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	if _, ok := m["work"]; !ok {
		t.Error("the JSON plan has no work section")
	}
	delete(m, "work")
	data, _ := json.MarshalIndent(m, "", "  ")
	return string(data)
}
