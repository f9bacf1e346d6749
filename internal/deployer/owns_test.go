package deployer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/kplan-dev/kplan/internal/config"
)

// targetReporter records which target each report is about.
type targetReporter struct {
	fakeReporter
	mu       sync.Mutex
	finished []string
}

func (r *targetReporter) Finished(ctx context.Context, o Outcome) {
	r.mu.Lock()
	r.finished = append(r.finished, fmt.Sprintf("%s %s", o.Target.Key(), o.Reason))
	r.mu.Unlock()
}

// Two deployers share a source's targets by cluster, as the shards of
// webhook replicas do: each keeps a worker for the declared targets it
// owns only; a failure no cluster owns (an environment the configuration
// does not map) is reported once, by the owner of the source; a target
// whose environment moves to another cluster moves to its owner.
func TestOwnsSplitsASourcesTargets(t *testing.T) {
	file := func(envB string) fstest.MapFS {
		tree := overlay("x")
		tree[".kplan.yaml"] = &fstest.MapFile{Data: []byte("targets:\n" +
			"  - {name: a, overlay: app, environment: one}\n" +
			"  - {name: b, overlay: app, environment: " + envB + "}\n" +
			"  - {name: c, overlay: app, environment: nowhere}\n")}
		return tree
	}
	m := newFakeMirror("c1", file("two"))
	m.commit("c2", "c1", file("one"))
	src := Source{Source: config.Source{Name: "octo/cfg@main", Repo: "octo/cfg", Branch: "main", CloneURL: "https://git.example/octo/cfg.git", File: ".kplan.yaml",
		Environments: []config.Environment{{Name: "one", Settings: config.Settings{Kubeconfig: "/k1"}}, {Name: "two", Settings: config.Settings{Kubeconfig: "/k2"}}}}}
	standIn := src.target().Cluster()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	newDeployer := func(clusters ...string) (*Deployer, *targetReporter) {
		rep := &targetReporter{}
		d := New(nil, m, rep, func(Target) Engine { return &fakeEngine{} }, log, src)
		d.Owns = func(t Target) bool { return slices.Contains(clusters, t.Cluster()) }
		return d, rep
	}
	d1, rep1 := newDeployer("/k1\x00", standIn)
	d2, rep2 := newDeployer("/k2\x00")
	workers := func(d *Deployer) []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		return slices.Sorted(maps.Keys(d.workers))
	}
	expand := func(sha string) {
		t.Helper()
		m.mu.Lock()
		m.tip = sha
		m.mu.Unlock()
		for _, d := range []*Deployer{d1, d2} {
			if err := d.Submit(src.Name, Request{SHA: sha}); err != nil {
				t.Fatal(err)
			}
			d.drain(context.Background(), d.workers[src.Name])
		}
	}

	expand("c1")
	if got, want := workers(d1), []string{"octo/cfg@main", "octo/cfg@main/a"}; !slices.Equal(got, want) {
		t.Errorf("the owner of cluster one runs %q, want %q", got, want)
	}
	if got, want := workers(d2), []string{"octo/cfg@main", "octo/cfg@main/b"}; !slices.Equal(got, want) {
		t.Errorf("the owner of cluster two runs %q, want %q", got, want)
	}
	if want := []string{"octo/cfg@main/c TargetsInvalid"}; !slices.Equal(rep1.finished, want) || len(rep2.finished) != 0 {
		t.Errorf("reports: the source's owner %q, the other %q; want %q from the source's owner alone", rep1.finished, rep2.finished, want)
	}

	// b's environment moves to cluster one.
	expand("c2")
	if got, want := workers(d1), []string{"octo/cfg@main", "octo/cfg@main/a", "octo/cfg@main/b"}; !slices.Equal(got, want) {
		t.Errorf("after the move, the owner of cluster one runs %q, want %q", got, want)
	}
	if got, want := workers(d2), []string{"octo/cfg@main"}; !slices.Equal(got, want) {
		t.Errorf("after the move, the owner of cluster two runs %q, want %q", got, want)
	}
	if !strings.Contains(logs.String(), "target moved to a cluster another deployer owns") {
		t.Errorf("the move is not logged as one:\n%s", logs.String())
	}
}
