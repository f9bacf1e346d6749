package deployer

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/test/gittest"
)

func TestSubmitKeepsOnlyTheNewestRequest(t *testing.T) {
	d := New([]Target{{Name: "prod"}}, nil, nil, nil, slog.New(slog.DiscardHandler))
	w := d.workers["prod"]
	steps := []struct {
		submit []Request
		want   *Request
	}{
		// Three merges while a deploy runs: only the last is deployed.
		{[]Request{{SHA: "a"}, {SHA: "b"}, {SHA: "c", PR: 3}}, &Request{SHA: "c", PR: 3}},
		// The push of a merged PR does not drop the PR's number.
		{[]Request{{SHA: "d", PR: 4}, {SHA: "d"}}, &Request{SHA: "d", PR: 4}},
		// A resync does not replace a concrete commit, nor the reverse.
		{[]Request{{SHA: "e"}, {}}, &Request{SHA: "e"}},
		{[]Request{{}, {SHA: "f"}}, &Request{SHA: "f"}},
		{[]Request{{}}, &Request{}},
		{nil, nil},
	}
	for i, s := range steps {
		for _, r := range s.submit {
			if err := d.Submit("prod", r); err != nil {
				t.Fatal(err)
			}
		}
		got := w.take()
		if (got == nil) != (s.want == nil) || (got != nil && *got != *s.want) {
			t.Errorf("step %d: took %+v, want %+v", i, got, s.want)
		}
	}
	if err := d.Submit("nope", Request{SHA: "a"}); err == nil {
		t.Error("an unknown target must be an error")
	}
}

// Remote bases are refused unless the target allows them.
func TestRemoteBasesAreOff(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "app"), 0o755)
	os.WriteFile(filepath.Join(dir, "app/kustomization.yaml"), []byte("resources:\n- https://github.com/example/config//base?ref=v1\n"), 0o644)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "remote")
	d := New(nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	_, err := d.render(context.Background(), Target{Name: "prod", Overlay: "app"}, dir, git(t, dir, "rev-parse", "HEAD"))
	if err == nil || !strings.Contains(err.Error(), "https://github.com/example/config//base?ref=v1") || !strings.Contains(err.Error(), "allowRemoteBases") {
		t.Errorf("render with a remote base: %v", err)
	}
}

var git = gittest.Git

// Two targets of one cluster rendering one inventory are both refused;
// once one renders another inventory, the other is woken and may deploy.
// Another cluster's target with the same inventory is no conflict.
func TestSharedInventoryRefusesBoth(t *testing.T) {
	d := New([]Target{{Name: "staging"}, {Name: "prod"}, {Name: "elsewhere", Context: "other"}}, nil, nil, nil, slog.New(slog.DiscardHandler))
	inv := deploy.Inventory{Kind: "ResourceGroup", Namespace: "default", Name: "inventory-1", ID: "inventory-1-default"}
	for _, name := range []string{"staging", "prod", "elsewhere"} {
		d.record(d.workers[name].target(), inv)
	}
	for _, w := range d.workers {
		w.take() // the wake-ups of the conflict found first
	}
	var ce *ConflictError
	err := d.claim(d.workers["staging"].target(), inv)
	if !errors.As(err, &ce) || !slices.Equal(ce.Targets, []string{"prod", "staging"}) || !strings.Contains(err.Error(), "would prune the other's objects") {
		t.Fatalf("staging: %v", err)
	}
	if r := d.workers["prod"].take(); r == nil {
		t.Error("prod was not woken to be refused too")
	}
	if err := d.claim(d.workers["prod"].target(), inv); !errors.As(err, &ce) {
		t.Errorf("prod: %v", err)
	}
	if err := d.claim(d.workers["elsewhere"].target(), inv); err != nil {
		t.Errorf("another cluster: %v", err)
	}
	// prod gets its own inventory: staging is woken and deploys.
	d.record(d.workers["prod"].target(), deploy.Inventory{Kind: "ResourceGroup", Namespace: "default", Name: "inventory-2", ID: "inventory-2-default"})
	if r := d.workers["staging"].take(); r == nil {
		t.Error("staging was not woken")
	}
	if err := d.claim(d.workers["staging"].target(), inv); err != nil {
		t.Errorf("staging after the fix: %v", err)
	}
	// The inventory says prod deployed last and prod has not moved: refused.
	d2 := New([]Target{{Name: "staging"}, {Name: "prod"}}, nil, nil, nil, slog.New(slog.DiscardHandler))
	if err := d2.lastDeployedBy(d2.workers["staging"].target(), inv, "prod"); !errors.As(err, &ce) {
		t.Errorf("inventory last deployed by prod: %v", err)
	}
	if err := d2.lastDeployedBy(d2.workers["staging"].target(), inv, "retired"); err != nil {
		t.Errorf("inventory last deployed by a target no longer configured: %v", err)
	}
}
