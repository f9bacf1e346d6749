package closure_test

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/demo"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// recorder is a file system that notes every path krusty asks about.
type recorder struct {
	filesys.FileSystem
	mu     sync.Mutex
	paths  map[string]bool
	listed []string // directory listings: the closure has no such entries
}

func newRecorder(fs filesys.FileSystem) *recorder {
	return &recorder{FileSystem: fs, paths: map[string]bool{}}
}

func (r *recorder) note(p string) {
	r.mu.Lock()
	r.paths[snapshot.Rel(p)] = true
	r.mu.Unlock()
}

func (r *recorder) list(p string) {
	r.mu.Lock()
	r.listed = append(r.listed, p)
	r.mu.Unlock()
}

func (r *recorder) ReadFile(p string) ([]byte, error) { r.note(p); return r.FileSystem.ReadFile(p) }
func (r *recorder) Open(p string) (filesys.File, error) {
	r.note(p)
	return r.FileSystem.Open(p)
}
func (r *recorder) IsDir(p string) bool  { r.note(p); return r.FileSystem.IsDir(p) }
func (r *recorder) Exists(p string) bool { r.note(p); return r.FileSystem.Exists(p) }
func (r *recorder) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r.note(p)
	return r.FileSystem.CleanedAbs(p)
}
func (r *recorder) ReadDir(p string) ([]string, error) { r.list(p); return r.FileSystem.ReadDir(p) }
func (r *recorder) Glob(p string) ([]string, error)    { r.list(p); return r.FileSystem.Glob(p) }
func (r *recorder) Walk(p string, fn filepath.WalkFunc) error {
	r.list(p)
	return r.FileSystem.Walk(p, fn)
}

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: NAME\ndata:\n  k: v\n"

func configMap(name string) string { return strings.ReplaceAll(cm, "NAME", name) }

// every field that names a file, with files present and missing.
var fieldsTree = map[string]string{
	"base/kustomization.yaml": "resources: [cm.yaml, sub]\nconfigurations: [conf.yaml]\ncrds: [crd.json]\n",
	"base/cm.yaml":            configMap("base"),
	"base/conf.yaml":          "nameReference: []\n",
	"base/crd.json":           "{}\n",
	"base/sub/Kustomization":  "resources: [x.yaml]\n",
	"base/sub/x.yaml":         configMap("x"),
	"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
		"patches: [{path: p.yaml}]\nconfigMapGenerator: [{name: c, files: [k=f.txt, g.txt], envs: [e.env]}]\n",
	"comp/p.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\ndata:\n  patched: \"1\"\n",
	"comp/f.txt":  "f\n",
	"comp/g.txt":  "g\n",
	"comp/e.env":  "E=1\n",
	"overlays/all/kustomization.yaml": `resources: [../../base, extra.yaml]
components: [../../comp]
patchesStrategicMerge:
- smp.yaml
- |
  apiVersion: v1
  kind: ConfigMap
  metadata: {name: x}
  data: {inline: "1"}
patchesJson6902: [{target: {version: v1, kind: ConfigMap, name: x}, path: j.yaml}]
replacements: [{path: r.yaml}]
secretGenerator: [{name: s, env: s.env}]
openapi: {path: schema.json}
transformers:
- t.yaml
- |
  apiVersion: builtin
  kind: LabelTransformer
  metadata: {name: l}
  labels: {a: b}
  fieldSpecs: [{path: metadata/labels, create: true}]
generators: [g.yaml]
inventory: {type: ConfigMap, configMap: {name: inv}}
`,
	"overlays/all/extra.yaml": configMap("extra"),
	"overlays/all/smp.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  smp: \"1\"\n",
	"overlays/all/j.yaml":     "- op: add\n  path: /data/j\n  value: \"1\"\n",
	"overlays/all/r.yaml": "- source: {kind: ConfigMap, name: x, fieldPath: data.k}\n" +
		"  targets: [{select: {kind: ConfigMap, name: extra}, fieldPaths: [data.k]}]\n",
	"overlays/all/s.env":       "S=1\n",
	"overlays/all/schema.json": `{"definitions": {}}`,
	"overlays/all/t.yaml": "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: t}\npath: tp.yaml\n" +
		"target: {kind: ConfigMap, name: extra}\n",
	"overlays/all/tp.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  t: \"1\"\n",
	"overlays/all/g.yaml":  "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: gen}\nfiles: [gen.txt]\n",
	"overlays/all/gen.txt": "gen\n",
	// Failures: the paths looked at must be in the closure too.
	"overlays/missing/kustomization.yaml": "resources: [../../base, nothere.yaml, ../nodir]\n" +
		"configMapGenerator: [{name: c, files: [gone.txt]}]\n",
	"overlays/twonames/kustomization.yaml": "resources: [../../base]\n",
	"overlays/twonames/kustomization.yml":  "resources: [../../base]\n",
	"overlays/outside/kustomization.yaml":  "resources: [../../base/cm.yaml]\n",
	"overlays/notcomp/kustomization.yaml":  "components: [../../base]\n",
	"overlays/filebase/kustomization.yaml": "resources: [../all/extra.yaml/deeper]\n",
}

// checkRecorded renders every overlay through a recorder and checks that
// every path krusty touched is in the static closure.
func checkRecorded(t *testing.T, s *snapshot.Snapshot, opts render.Options) (map[string]*closure.Closure, map[string]error) {
	t.Helper()
	ctx := context.Background()
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := render.Prepare(s.FS, tree); err != nil {
		t.Fatal(err)
	}
	b := closure.New(closure.SnapshotSource(ctx, s), closure.Options{EnableHelm: opts.EnableHelm})
	k := render.NewKustomizer(opts)
	out, errs := map[string]*closure.Closure{}, map[string]error{}
	for _, o := range tree.Overlays {
		c := b.Overlay(o)
		out[o] = c
		if c.Unbounded != "" {
			continue
		}
		rec := newRecorder(s.FS)
		_, rerr := k.Render(rec, o, c.OpenAPI)
		errs[o] = rerr
		for p := range rec.paths {
			if len(c.Remote) > 0 && (strings.HasPrefix(p, "tmp/") || strings.Contains(p, "https:")) {
				continue // a clone's scratch directory, or the remote ref itself
			}
			if _, ok := slices.BinarySearch(c.Paths, p); !ok {
				t.Errorf("%s: the build read %s, which its closure lacks (render error: %v)", o, p, rerr)
			}
		}
		if len(rec.listed) > 0 {
			t.Errorf("%s: the build listed directories %q; closures cannot bound that", o, rec.listed)
		}
	}
	return out, errs
}

func TestRecordedWithinStatic(t *testing.T) {
	for _, opts := range []render.Options{{}, {LoadRestrictorNone: true}} {
		got, errs := checkRecorded(t, testkit.Snapshot(t, "test", fieldsTree), opts)
		if errs["overlays/all"] != nil {
			t.Fatalf("overlays/all must render: %v", errs["overlays/all"])
		}
		all := got["overlays/all"]
		for _, want := range []string{
			"overlays/all/kustomization.yml", "overlays/all/Kustomization", // looked for, absent
			"base/sub/Kustomization", "base/sub/x.yaml", "base/conf.yaml", "base/crd.json",
			"comp/p.yaml", "comp/f.txt", "comp/g.txt", "comp/e.env",
			"overlays/all/smp.yaml", "overlays/all/j.yaml", "overlays/all/r.yaml", "overlays/all/s.env",
			"overlays/all/schema.json", "overlays/all/t.yaml", "overlays/all/tp.yaml", "overlays/all/g.yaml", "overlays/all/gen.txt",
			"overlays", "base", ".",
		} {
			if _, ok := slices.BinarySearch(all.Paths, want); !ok {
				t.Errorf("closure of overlays/all lacks %s", want)
			}
		}
		if !all.Bounded() || !all.OpenAPI {
			t.Errorf("overlays/all: bounded %v (%s), openapi %v", all.Bounded(), all.Unbounded, all.OpenAPI)
		}
		for _, unrelated := range []string{"overlays/missing/kustomization.yaml", "overlays/all/extra.yaml/deeper"} {
			if _, ok := slices.BinarySearch(all.Paths, unrelated); ok {
				t.Errorf("closure of overlays/all has unrelated %s", unrelated)
			}
		}
	}
}

func TestComponentsStoryRecorded(t *testing.T) {
	s, err := snapshot.FromFS(demo.Story(), "story")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := checkRecorded(t, s, render.Options{})
	if len(got) != 3 {
		t.Errorf("overlays: %d, want 3", len(got))
	}
}

func TestUnbounded(t *testing.T) {
	cases := []struct {
		name    string
		kust    string
		helm    bool
		remote  bool
		reason  string // in Unbounded; "" for bounded
		bounded bool
	}{
		{name: "remote git base", kust: "resources:\n- github.com/org/repo//base?ref=v1\n", remote: true},
		{name: "remote file", kust: "resources: [https://example.com/x.yaml]\n", remote: true},
		{name: "remote component", kust: "components: [https://github.com/org/repo//c]\n", remote: true},
		{name: "remote patch", kust: "patches: [{path: https://example.com/p.yaml}]\n", remote: true},
		{name: "scp base", kust: "resources: [git@github.com:org/repo.git]\n", remote: true},
		{name: "unknown field", kust: "resources: []\nnewField: [x.yaml]\n", reason: "unknown field"},
		{name: "plugin", kust: "transformers: [\"apiVersion: example.com/v1\\nkind: Mine\\nmetadata: {name: m}\\n\"]\n", reason: "plugin"},
		{name: "generator dir", kust: "generators: [gens]\n", reason: "builds a kustomization"},
		// A local chart is its chart home's files; one from a chart
		// repository the chart home lacks is remote.
		{name: "helm local chart", kust: "helmCharts: [{name: c}]\n", helm: true, bounded: true},
		{name: "helm chart from a repository", kust: "helmCharts: [{name: c, repo: https://charts.example.com, version: 1.0.0}]\n", helm: true, remote: true},
		{name: "helm absolute chart home", kust: "helmGlobals: {chartHome: /opt/charts}\nhelmCharts: [{name: c}]\n", helm: true, reason: "outside the repository"},
		{name: "helm disabled", kust: "helmCharts: [{name: c}]\n", bounded: true},
		{name: "builtin transformer", kust: "transformers: [\"apiVersion: builtin\\nkind: PrefixTransformer\\nmetadata: {name: p}\\nprefix: x-\\n\"]\n", bounded: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testkit.Snapshot(t, "test", map[string]string{"o/kustomization.yaml": tc.kust, "o/gens/kustomization.yaml": "resources: []\n"})
			c := closure.New(closure.SnapshotSource(context.Background(), s), closure.Options{EnableHelm: tc.helm}).Overlay("o")
			if c.Bounded() != tc.bounded {
				t.Errorf("bounded = %v, want %v (remote %v, unbounded %q)", c.Bounded(), tc.bounded, c.Remote, c.Unbounded)
			}
			if tc.remote != (len(c.Remote) > 0) {
				t.Errorf("remote = %v", c.Remote)
			}
			if !strings.Contains(c.Unbounded, tc.reason) {
				t.Errorf("unbounded = %q, want it to say %q", c.Unbounded, tc.reason)
			}
		})
	}
}

func TestMeets(t *testing.T) {
	c := &closure.Closure{Paths: []string{".", "a", "a/kustomization.yaml", "b/x.yaml"}}
	for _, tc := range []struct {
		changed map[string]bool
		want    bool
	}{
		{map[string]bool{"a/other.yaml": true}, false},
		{map[string]bool{"b/x.yaml": true}, true},
		{map[string]bool{"a": true, "z": true, "y": true, "w": true, "v": true}, true},
		{map[string]bool{}, false},
	} {
		if got := c.Meets(tc.changed); got != tc.want {
			t.Errorf("Meets(%v) = %v, want %v", tc.changed, got, tc.want)
		}
	}
}

// On the kubeflow corpus, every build stays within its closure, and a
// snapshot holding only the closure renders exactly as the whole tree.
func TestCorpus(t *testing.T) {
	tarball := testkit.Corpus(t)
	dir := t.TempDir()
	testkit.Untar(t, tarball, dir)
	repo := filepath.Join(dir, "kubeflow-manifests")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "corpus"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ctx := context.Background()
	full, err := snapshot.FromCommit(ctx, repo, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	closures, _ := checkRecorded(t, full, render.Options{})
	k := render.NewKustomizer(render.Options{})
	bounded := 0
	for o, c := range closures {
		if !c.Bounded() {
			continue
		}
		bounded++
		lazy, err := snapshot.Open(ctx, repo, "HEAD", snapshot.NewBlobs(repo))
		if err != nil {
			t.Fatal(err)
		}
		if err := lazy.Load(ctx, c.Paths); err != nil {
			t.Fatal(err)
		}
		tree, err := render.Discover(lazy.FS, render.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if err := render.Prepare(lazy.FS, tree); err != nil {
			t.Fatal(err)
		}
		want, werr := k.Render(full.FS, o, c.OpenAPI)
		got, gerr := k.Render(lazy.FS, o, c.OpenAPI)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%s: error from the closure alone %v, from the whole tree %v", o, gerr, werr)
			continue
		}
		wy, _ := render.YAML(want)
		gy, _ := render.YAML(got)
		if string(wy) != string(gy) {
			t.Errorf("%s: the closure alone renders differently", o)
		}
	}
	t.Logf("%d overlays, %d bounded", len(closures), bounded)
	if bounded < 40 {
		t.Errorf("only %d of %d corpus overlays have a bounded closure", bounded, len(closures))
	}
}

// A probe answers, for any one changed path, what the overlay's closure
// answers, and says the same of what the build reads outside the tree.
func TestProbeAgreesWithOverlay(t *testing.T) {
	story, err := snapshot.FromFS(demo.Story(), "story")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*snapshot.Snapshot{"fields": testkit.Snapshot(t, "test", fieldsTree), "story": story} {
		tree, err := render.Discover(s.FS, render.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		b := closure.New(closure.SnapshotSource(context.Background(), s), closure.Options{})
		candidates := map[string]bool{"elsewhere/x.yaml": true}
		for _, o := range tree.Overlays {
			for _, p := range b.Overlay(o).Paths {
				candidates[p] = true
				candidates[p+"/below"] = true
			}
		}
		for p := range candidates {
			changed := map[string]bool{p: true}
			probe := b.Probe(changed)
			for _, o := range tree.Overlays {
				c := b.Overlay(o)
				meets, outline := probe.Overlay(o)
				if meets != c.Meets(changed) {
					t.Errorf("%s: %s changed: the probe says %v, the closure %v", name, p, meets, c.Meets(changed))
				}
				if outline.Unbounded != c.Unbounded || outline.OpenAPI != c.OpenAPI || len(outline.Remote) != len(c.Remote) {
					t.Errorf("%s: %s: the probe's outline %+v differs from the closure %+v", name, o, outline, c)
				}
			}
		}
	}
}

// The Builders of two sides sharing the kustomizations a change does not
// touch compute, on each side, the closures a Builder of its own does:
// a changed patch, a base gaining the file a reference looked for, a
// kustomization removed, a chart directory gaining a file.
func TestSharedNodesAgree(t *testing.T) {
	sides, changed, dirs := sharedSides(t)
	ctx := context.Background()
	opts := closure.Options{EnableHelm: true}
	for _, first := range []int{0, 1} {
		shared := closure.Options{EnableHelm: true, Shared: closure.NewShared(changed)}
		var bs [2]*closure.Builder
		for i, s := range sides {
			bs[i] = closure.New(closure.SnapshotSource(ctx, s), shared)
		}
		order := []int{first, 1 - first}
		for _, i := range order {
			for _, d := range dirs {
				bs[i].Overlay(d)
			}
		}
		for i, s := range sides {
			own := closure.New(closure.SnapshotSource(ctx, s), opts)
			for _, d := range dirs {
				want, got := own.Overlay(d), bs[i].Overlay(d)
				if !slices.Equal(want.Paths, got.Paths) || want.Unbounded != got.Unbounded || len(want.Remote) != len(got.Remote) {
					t.Errorf("side %d (side %d first): %s: shared closure %v, own %v", i, first, d, got, want)
				}
			}
		}
	}
}

// TestSharedProbesAgree: a side's Probe that takes the other side's
// answer for an overlay that meets nothing changed says what probing the
// side on its own says, helm chart directories and remote references
// included.
func TestSharedProbesAgree(t *testing.T) {
	sides, changed, dirs := sharedSides(t)
	ctx := context.Background()
	for _, first := range []int{0, 1} {
		shared := closure.Options{EnableHelm: true, Shared: closure.NewShared(changed)}
		var probes [2]*closure.Probe
		for i, s := range sides {
			probes[i] = closure.New(closure.SnapshotSource(ctx, s), shared).Probe(changed)
		}
		type answer struct {
			meets bool
			c     *closure.Closure
		}
		var got [2][]answer
		for _, i := range []int{first, 1 - first} {
			for _, d := range dirs {
				m, c := probes[i].Overlay(d)
				got[i] = append(got[i], answer{m, c})
			}
		}
		for i, s := range sides {
			own := closure.New(closure.SnapshotSource(ctx, s), closure.Options{EnableHelm: true})
			for j, d := range dirs {
				want := own.Overlay(d)
				g := got[i][j]
				if g.meets != want.Meets(changed) || g.c.Overlay != d || g.c.Unbounded != want.Unbounded || g.c.OpenAPI != want.OpenAPI || !slices.Equal(g.c.Remote, want.Remote) {
					t.Errorf("side %d (side %d first): %s: probe says %v %+v; on its own %v %+v", i, first, d, g.meets, g.c, want.Meets(changed), want)
				}
			}
		}
	}
}

// sharedSides are two sides of a change to fieldsTree, their changed
// paths, and the directories to take closures of.
func sharedSides(t *testing.T) ([2]*snapshot.Snapshot, map[string]bool, []string) {
	const chart = "helmCharts: [{name: c, releaseName: r}]\n"
	base := map[string]string{}
	for k, v := range fieldsTree {
		base[k] = v
	}
	base["helm/kustomization.yaml"] = chart
	base["helm/charts/c/Chart.yaml"] = "name: c\n"
	head := map[string]string{}
	for k, v := range base {
		head[k] = v
	}
	head["comp/p.yaml"] += "# changed\n"
	head["overlays/missing/nothere.yaml"] = configMap("now")
	delete(head, "overlays/twonames/kustomization.yml")
	head["helm/charts/c/templates/new.yaml"] = configMap("new")
	sides := [2]*snapshot.Snapshot{testkit.Snapshot(t, "test", base), testkit.Snapshot(t, "test", head)}
	changed := snapshot.Changed(sides[0].Index, sides[1].Index)
	var dirs []string
	for _, s := range sides {
		tree, err := render.Discover(s.FS, render.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, tree.Overlays...)
		dirs = append(dirs, "base", "comp", "helm")
	}
	return sides, changed, dirs
}

// TestIsRemoteFileAsKrusty: the quick look at a ref's start answers what
// parsing it as a URL answers, as krusty's loader does.
func TestIsRemoteFileAsKrusty(t *testing.T) {
	for _, ref := range []string{"", "h", "http", "http:", "https:x", "HTTP://example.com/a.yaml", "Https://a/b",
		"httpx://a", " http://a", "./http://a", "http:/a", "https://[::1]:x/", "base", "../base/cm.yaml", "git@github.com:a/b"} {
		u, err := url.Parse(ref)
		want := err == nil && (u.Scheme == "http" || u.Scheme == "https")
		if got := closure.IsRemoteFile(ref); got != want {
			t.Errorf("IsRemoteFile(%q) = %v, want %v", ref, got, want)
		}
	}
}
