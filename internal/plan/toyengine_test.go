package plan

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/repoconfig"
	"github.com/kplan-dev/kplan/internal/shard"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// toyEngine is a fourth engine that exists only here: a directory
// holding a toy.yaml that lists manifests (`manifests: [a.yaml]`) is a
// target, toy:<dir>, applying them. It reaches the plan through the
// registry alone (the rows passed to execute), as a real engine would
// through a row of defaultEngines.
type toyEngine struct{}

// toyFile is the file that makes its directory a toy target.
const toyFile = "toy.yaml"

// detect is on when either side holds a toy.yaml.
func (toyEngine) detect(_ context.Context, c *change) (engineRun, error) {
	for _, s := range c.snaps {
		if len(toyFiles(s)) > 0 {
			return toyRun{}, nil
		}
	}
	return nil, nil
}

func toyFiles(s *snapshot.Snapshot) []string {
	var out []string
	for _, p := range s.Index.Paths() {
		if path.Base(p) == toyFile {
			out = append(out, p)
		}
	}
	return out
}

type toyRun struct{}

func (toyRun) shardRefusal() error {
	return errors.New("--shard: toy mode plans its targets in one run")
}

// plan reads every toy.yaml of each side and the manifests it lists: a
// target whose closure is those files.
func (toyRun) plan(ctx context.Context, c *change) (*engineMode, error) {
	m := newEngineMode("Toy")
	for i, s := range c.snaps {
		for _, f := range toyFiles(s) {
			dir := path.Dir(f)
			objs, paths, err := readToy(ctx, s, f)
			u := closure.NewUnion("toy:" + dir)
			for _, p := range paths {
				u.Path(p)
			}
			m.add(i, &engineTarget{
				name: "toy:" + dir, path: dir, file: f, cluster: "toy:default", closure: u.Closure(),
				notes: []string{"a toy engine applies it"},
				side: func() inventorydiff.Side {
					return engineSide("toy target "+dir, dir, objs, repoconfig.DefaultNamespace, err)
				},
			})
		}
	}
	return m, nil
}

// readToy reads a toy.yaml and the manifests it lists: their objects,
// and every path it read.
func readToy(ctx context.Context, s *snapshot.Snapshot, file string) ([]*yaml.RNode, []string, error) {
	paths := []string{file}
	data, err := s.ReadFile(ctx, file)
	if err != nil {
		return nil, paths, err
	}
	var spec struct {
		Manifests []string `json:"manifests"`
	}
	if err := sigsyaml.UnmarshalStrict(data, &spec); err != nil {
		return nil, paths, fmt.Errorf("%s: %w", file, err)
	}
	var objs []*yaml.RNode
	for _, m := range spec.Manifests {
		p := path.Join(path.Dir(file), m)
		paths = append(paths, p)
		data, err := s.ReadFile(ctx, p)
		if err != nil {
			return nil, paths, fmt.Errorf("%s: %w", file, err)
		}
		nodes, err := kio.FromBytes(data)
		if err != nil {
			return nil, paths, fmt.Errorf("%s: %w", p, err)
		}
		objs = append(objs, nodes...)
	}
	return objs, paths, nil
}

// A fourth engine added to the registry by a test, without a line of the
// planner naming it, plans its targets beside the overlays: its target
// shows the object it adds and the one it changes, the files it reads are
// not unread, its notes carry its label, and a sharded plan is refused
// with its own message. Without the row the repository plans as before.
func TestToyEngineThroughTheRegistry(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"overlays/a/kustomization.yaml": "resources: [cm.yaml]\n",
		"overlays/a/cm.yaml":            cm("plain", "k: v"),
		"toys/app/toy.yaml":             "manifests: [one.yaml]\n",
		"toys/app/one.yaml":             cm("one", "k: v1"),
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{
		"toys/app/toy.yaml": "manifests: [one.yaml, two.yaml]\n",
		"toys/app/one.yaml": cm("one", "k: v2"),
		"toys/app/two.yaml": cm("two", "k: v"),
	})
	head := commit(t, dir, "head")

	ctx := context.Background()
	opts := Options{RepoDir: dir, Base: base, Head: head, Resolver: notFound{}}
	engines := append(defaultEngines(), toyEngine{})
	for _, full := range []bool{false, true} {
		opts.Full = full
		_, p, err := execute(ctx, opts, engines)
		if err != nil {
			t.Fatalf("full=%v: %v", full, err)
		}
		o := overlayOf(p, "toy:toys/app")
		if o == nil {
			t.Fatalf("full=%v: no toy target in the plan: %v", full, status(p))
		}
		if o.Status != inventorydiff.Changed || !slices.Equal(o.Added, []string{"~G_v1_ConfigMap|default|two"}) ||
			len(o.Changed) != 1 || o.Changed[0].Key != "~G_v1_ConfigMap|default|one" {
			t.Errorf("full=%v: toy target %s, added %q, changed %+v; want two added, one changed", full, o.Status, o.Added, o.Changed)
		}
		if o.File != "toys/app/toy.yaml" || !slices.Contains(o.Notes, "Toy: a toy engine applies it") {
			t.Errorf("full=%v: toy target's file %q, notes %q", full, o.File, o.Notes)
		}
		if len(p.Unread) != 0 {
			t.Errorf("full=%v: unread %v; the toy target reads its files", full, p.Unread)
		}
		if a := overlayOf(p, "overlays/a"); a == nil || a.Status != inventorydiff.Unchanged {
			t.Errorf("full=%v: overlays/a: %+v; want it planned unchanged beside the toy target", full, a)
		}
	}

	opts.Full = false
	opts.Shard = shard.Shard{Index: 1, Count: 2}
	if _, _, err := execute(ctx, opts, engines); err == nil || err.Error() != "--shard: toy mode plans its targets in one run" {
		t.Errorf("sharded: %v; want the toy row's refusal", err)
	}

	opts.Shard = shard.Shard{}
	p, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if overlayOf(p, "toy:toys/app") != nil || len(p.Unread) == 0 {
		t.Errorf("without the toy row: %v, unread %v; want no toy target, its files unread", status(p), p.Unread)
	}
}

func overlayOf(p *inventorydiff.Plan, name string) *inventorydiff.Overlay {
	for i := range p.Overlays {
		if p.Overlays[i].Path == name {
			return &p.Overlays[i]
		}
	}
	return nil
}
