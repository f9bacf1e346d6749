package plan

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kplan-dev/kplan/internal/danger"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/test/gittest"
)

// git runs the git command line (shared with other packages' tests).
var git = gittest.Git

var write = gittest.Write

func commit(t *testing.T, dir, msg string) string {
	t.Helper()
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return git(t, dir, "rev-parse", "HEAD")
}

func cm(name, data string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  " + data + "\n"
}

const deployYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: web:IMAGE
`

// fixture: overlays sharing a base and a component, with patches,
// generators, a symlinked base and a reference to a file that is absent.
var fixture = map[string]string{
	"base/kustomization.yaml": "resources: [deployment.yaml, cm.yaml]\n",
	"base/deployment.yaml":    strings.ReplaceAll(deployYAML, "IMAGE", "1"),
	"base/cm.yaml":            cm("base", "k: v"),
	"components/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
		"patches: [{path: patch.yaml}]\nconfigMapGenerator: [{name: conf, files: [conf.txt]}]\n",
	"components/extra/patch.yaml":   cm("base", "patched: one"),
	"components/extra/conf.txt":     "conf one\n",
	"overlays/a/kustomization.yaml": "resources: [../../base]\ncomponents: [../../components/extra]\n",
	"overlays/b/kustomization.yaml": "resources: [../../base]\npatches: [{path: p.yaml}]\n" +
		"configMapGenerator: [{name: gen, envs: [gen.env]}]\n",
	"overlays/b/p.yaml":             cm("base", "b: one"),
	"overlays/b/gen.env":            "A=1\n",
	"overlays/c/kustomization.yaml": "resources: [c.yaml]\n",
	"overlays/c/c.yaml":             cm("c", "k: v"),
	"overlays/d/kustomization.yaml": "resources: [../../base, extra.yaml]\n",
	"overlays/d/extra.yaml":         cm("extra", "k: v"),
	"overlays/f/kustomization.yaml": "resources: [later.yaml]\n",
	"overlays/g/kustomization.yaml": "resources: [linked]\n",
	"overlays/g/linked":             "->../../base",
	"other/unrelated.txt":           "one\n",
}

// notFound is a resolver for which no host exists.
type notFound struct{}

func (notFound) LookupHost(_ context.Context, host string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// plans computes the full plan and the changed-only plan (with a cold
// and a warm cache) and checks they agree.
func plans(t *testing.T, dir, base, head string) (full, changed *inventorydiff.Plan, st Stats) {
	t.Helper()
	return plansWith(t, dir, base, head, render.Options{})
}

// plansWith is plans rendering with ropts.
func plansWith(t *testing.T, dir, base, head string, ropts render.Options) (full, changed *inventorydiff.Plan, st Stats) {
	t.Helper()
	ctx := context.Background()
	opts := Options{RepoDir: dir, Base: base, Head: head, Resolver: notFound{}, Render: ropts}
	opts.Full = true
	full, _, err := Execute(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Full = false
	changed, st, err = Execute(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	sameChanges(t, "changed-only", full, changed)
	opts.CacheDir = t.TempDir()
	stored := 0
	for _, run := range []string{"cold cache", "warm cache"} {
		cached, cst, err := Execute(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		sameChanges(t, run, full, cached)
		if run == "cold cache" {
			stored = cst.Stored
		} else if cst.CacheHits != stored || cst.Rendered != st.Rendered-stored {
			t.Errorf("warm cache: %+v; want %d hits, the builds stored in the cold run", cst, stored)
		}
	}
	return full, changed, st
}

// sameChanges checks that a changed-only plan says what the full plan
// says: every overlay with its status, and for every overlay that changed
// or failed because of the change, the same details. Overlays the change
// cannot affect are only known to be unchanged (a failure both sides
// share included).
func sameChanges(t *testing.T, what string, full, got *inventorydiff.Plan) {
	t.Helper()
	if len(full.Overlays) != len(got.Overlays) {
		t.Fatalf("%s: %d overlays, full plan %d", what, len(got.Overlays), len(full.Overlays))
	}
	for i, f := range full.Overlays {
		g := got.Overlays[i]
		// Which variants render an object the change adds is noted from
		// what each plan knows (its renders, the cache): not a change.
		f.Notes, g.Notes = withoutVariants(f.Notes), withoutVariants(g.Notes)
		switch {
		case f.Path != g.Path:
			t.Errorf("%s: overlay %d is %s, full plan %s", what, i, g.Path, f.Path)
		case g.Status == inventorydiff.Unchanged && f.Status == inventorydiff.Unchanged:
		case g.Status == inventorydiff.Unchanged && f.Status == inventorydiff.Failed && f.BaseErr == f.HeadErr:
		case !reflect.DeepEqual(f, g):
			t.Errorf("%s: %s differs from the full plan:\n got %+v\nfull %+v", what, f.Path, g, f)
		}
	}
	ft, gt := full.Totals, got.Totals
	ft.Failed, gt.Failed = 0, 0
	if ft != gt {
		t.Errorf("%s: totals %+v, full plan %+v", what, got.Totals, full.Totals)
	}
}

func withoutVariants(notes []string) []string {
	out := slices.DeleteFunc(slices.Clone(notes), func(n string) bool { return strings.HasPrefix(n, danger.VariantNote) })
	if len(out) == 0 {
		return nil
	}
	return out
}

func status(p *inventorydiff.Plan) map[string]inventorydiff.Status {
	out := map[string]inventorydiff.Status{}
	for _, o := range p.Overlays {
		out[o.Path] = o.Status
	}
	return out
}

// Every kind of change gives the full plan, rendering only what it can
// affect.
func TestChangedOnlyEqualsFull(t *testing.T) {
	cases := []struct {
		name    string
		change  map[string]string
		changed []string // overlays the plan shows changed (or new, removed, failing)
		skipped int      // overlays not rendered
	}{
		{"shared base file", map[string]string{"base/deployment.yaml": strings.ReplaceAll(deployYAML, "IMAGE", "2")},
			[]string{"overlays/a", "overlays/b", "overlays/d", "overlays/g"}, 2},
		{"component file", map[string]string{"components/extra/patch.yaml": cm("base", "patched: two")},
			[]string{"overlays/a"}, 5},
		{"generator input", map[string]string{"components/extra/conf.txt": "conf two\n", "overlays/b/gen.env": "A=2\n"},
			[]string{"overlays/a", "overlays/b"}, 4},
		{"patch file", map[string]string{"overlays/b/p.yaml": cm("base", "b: two")},
			[]string{"overlays/b"}, 5},
		{"deleted file", map[string]string{"overlays/d/extra.yaml": ""},
			[]string{"overlays/d"}, 5},
		{"renamed overlay", map[string]string{"overlays/c/kustomization.yaml": "", "overlays/c/c.yaml": "",
			"overlays/c2/kustomization.yaml": "resources: [c.yaml]\n", "overlays/c2/c.yaml": cm("c", "k: v")},
			[]string{"overlays/c2"}, 5}, // moved from overlays/c: one overlay
		{"new overlay", map[string]string{"overlays/e/kustomization.yaml": "resources: [../../base]\n"},
			[]string{"overlays/e"}, 6},
		{"second kustomization file", map[string]string{"overlays/c/kustomization.yml": "resources: [c.yaml]\n"},
			[]string{"overlays/c"}, 5},
		{"file appears", map[string]string{"overlays/f/later.yaml": cm("later", "k: v")},
			[]string{"overlays/f"}, 5},
		{"through a symlink", map[string]string{"base/cm.yaml": cm("base", "k: w")},
			[]string{"overlays/a", "overlays/b", "overlays/d", "overlays/g"}, 2},
		// c, now listed by a, is still planned (and unaffected), not removed.
		{"overlay becomes a base", map[string]string{"overlays/a/kustomization.yaml": "resources: [../c]\n"},
			[]string{"overlays/a"}, 5},
		{"unrelated file", map[string]string{"other/unrelated.txt": "two\n"}, nil, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			write(t, dir, fixture)
			base := commit(t, dir, "base")
			write(t, dir, tc.change)
			head := commit(t, dir, "head")
			full, changed, st := plans(t, dir, base, head)
			var got []string
			for _, o := range full.Overlays {
				if o.Status != inventorydiff.Unchanged && !(o.Status == inventorydiff.Failed && o.BaseErr == o.HeadErr) {
					got = append(got, o.Path)
				}
			}
			if !reflect.DeepEqual(got, tc.changed) {
				t.Errorf("full plan changes %q, want %q (statuses %v)", got, tc.changed, status(full))
			}
			if st.Skipped != tc.skipped {
				t.Errorf("skipped %d overlays, want %d (changed-only statuses %v)", st.Skipped, tc.skipped, status(changed))
			}
		})
	}
}

// A head in the work tree: modified, deleted and untracked files count.
func TestWorkingTreeHead(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, fixture)
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{
		"overlays/b/gen.env":            "A=3\n",                             // modified
		"overlays/d/extra.yaml":         "",                                  // deleted
		"overlays/h/kustomization.yaml": "resources: [../../base/cm.yaml]\n", // untracked
	})
	full, changed, st := plans(t, dir, base, "")
	want := map[string]inventorydiff.Status{"overlays/b": inventorydiff.Changed, "overlays/d": inventorydiff.Failed, "overlays/h": inventorydiff.Failed}
	for o, s := range want {
		if status(full)[o] != s || status(changed)[o] != s {
			t.Errorf("%s: full %s, changed-only %s; want %s", o, status(full)[o], status(changed)[o], s)
		}
	}
	if st.Skipped != 4 { // a, c, f, g
		t.Errorf("skipped %d, want 4", st.Skipped)
	}
}

// A remote resource on a host the network policy allows but that does
// not resolve fails the overlay on both sides without a build, in both
// kinds of plan; one on a host the policy does not list is refused by the
// render and never looked up; an overlay whose closure is unbounded always
// renders.
func TestRemoteAndUnbounded(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	files := map[string]string{
		"remote/kustomization.yaml":  "resources:\n- https://kplan-test.invalid/manifests.yaml\n- local.yaml\n",
		"remote/local.yaml":          cm("local", "k: v"),
		"gitbase/kustomization.yaml": "resources:\n- local.yaml\n- github.com/kplan-dev/nothing//base?ref=v1\n",
		"gitbase/local.yaml":         cm("local", "k: v"),
		"unknown/kustomization.yaml": "resources: [x.yaml]\nfutureField: [y.yaml]\n",
		"unknown/x.yaml":             cm("x", "k: v"),
		"plain/kustomization.yaml":   "resources: [x.yaml]\n",
		"plain/x.yaml":               cm("x", "k: v"),
	}
	write(t, dir, files)
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"plain/x.yaml": cm("x", "k: w")})
	head := commit(t, dir, "head")
	policy, err := netpolicy.New([]string{"kplan-test.invalid"}, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	full, _, st := plansWith(t, dir, base, head, render.Options{Remote: policy})
	if st.FailFast != 4 || st.Skipped != 0 || st.Rendered != 4 {
		t.Errorf("stats %+v: want the remote overlays failed fast on both sides, the others rendered", st)
	}
	wantErr := map[string]string{"remote": "kplan-test.invalid does not resolve", "gitbase": "is a remote git base"}
	for _, o := range full.Overlays {
		if want, ok := wantErr[o.Path]; ok && (o.Status != inventorydiff.Failed || !strings.Contains(o.HeadErr, want)) {
			t.Errorf("%s: %s %q, want an error saying %q", o.Path, o.Status, o.HeadErr, want)
		}
	}
	// Without the host listed: refused without building, never looked
	// up. The refusal does not depend on the network, so the changed-only
	// plan skips the overlay the change does not reach; the full plan
	// shows the refusal.
	lookups := &countLookups{}
	_, st, err = Execute(context.Background(), Options{RepoDir: dir, Base: base, Head: head, Resolver: lookups})
	if err != nil {
		t.Fatal(err)
	}
	if st.FailFast != 2 || st.Skipped != 1 || lookups.n.Load() != 0 {
		t.Errorf("no hosts listed: %d builds failed fast (want the git base's 2), %d overlays skipped (want remote's 1), %d lookups (want none)",
			st.FailFast, st.Skipped, lookups.n.Load())
	}
	p, st, err := Execute(context.Background(), Options{RepoDir: dir, Base: base, Head: head, Resolver: lookups, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.FailFast != 4 || lookups.n.Load() != 0 {
		t.Errorf("no hosts listed, full plan: %d builds failed fast (want the git base's 2 and the refused host's 2), %d lookups (want none)", st.FailFast, lookups.n.Load())
	}
	for _, o := range p.Overlays {
		if o.Path == "remote" && !strings.Contains(o.HeadErr, "refused") {
			t.Errorf("remote with no hosts listed: %q, want the policy's refusal", o.HeadErr)
		}
	}
}

// countLookups counts the host lookups a plan makes.
type countLookups struct{ n atomic.Int32 }

func (c *countLookups) LookupHost(ctx context.Context, host string) ([]string, error) {
	c.n.Add(1)
	return notFound{}.LookupHost(ctx, host)
}

// imageBump is a repository of the fixture (base) and a commit bumping
// its Deployment's image (head).
func imageBump(t *testing.T) (dir, base, head string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, fixture)
	base = commit(t, dir, "base")
	write(t, dir, map[string]string{"base/deployment.yaml": strings.ReplaceAll(deployYAML, "IMAGE", "2")})
	head = commit(t, dir, "head")
	return dir, base, head
}

// Damaged cache entries never change a plan: they are rendered again.
func TestCorruptCache(t *testing.T) {
	dir, base, head := imageBump(t)
	ctx := context.Background()
	opts := Options{RepoDir: dir, Base: base, Head: head, CacheDir: t.TempDir()}
	want, first, err := Execute(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := filepath.Glob(filepath.Join(opts.CacheDir, "*.yaml"))
	if err != nil || len(entries) != first.Rendered {
		t.Fatalf("%d cache entries, want %d (%v)", len(entries), first.Rendered, err)
	}
	// Swap the entries around (right format, wrong key) and damage one.
	for i, e := range entries {
		data, err := os.ReadFile(entries[(i+1)%len(entries)])
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			data = data[:len(data)-3]
		}
		if err := os.WriteFile(e, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, st, err := Execute(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.CacheHits != 0 || st.Rendered != first.Rendered {
		t.Errorf("stats %+v after damaging the cache: want no hits", st)
	}
	// How long each plan took differs by design; what it planned must not.
	if want.Work.Took, got.Work.Took = 0, 0; !reflect.DeepEqual(want, got) {
		t.Errorf("plan changed with a damaged cache")
	}
	// The renders repaired the entries.
	if _, st, err := Execute(ctx, opts); err != nil || st.CacheHits != first.Rendered {
		t.Errorf("after repair: %+v, %v", st, err)
	}
}

func TestNoBase(t *testing.T) {
	if _, err := Run(context.Background(), Options{RepoDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no base") {
		t.Errorf("err = %v", err)
	}
	if _, err := Run(context.Background(), Options{RepoDir: t.TempDir(), Base: "main"}); err == nil {
		t.Error("a directory outside git must be an error")
	}
}

// A helmCharts chart from an OCI registry whose host the policy does
// not list is refused alike on both sides, whatever the network does: a
// changed-only plan skips the overlay when the change does not reach it,
// as it skips an http(s) resource on such a host.
func TestRefusedRegistryChartSkipped(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{
		"oci/kustomization.yaml":   "helmCharts:\n- {name: demo, repo: oci://registry.kplan-test.invalid/charts, version: 1.0.0, releaseName: demo}\n",
		"plain/kustomization.yaml": "resources: [x.yaml]\n",
		"plain/x.yaml":             cm("x", "k: v"),
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"plain/x.yaml": cm("x", "k: w")})
	head := commit(t, dir, "head")
	_, st, err := Execute(context.Background(), Options{RepoDir: dir, Base: base, Head: head, Render: render.Options{EnableHelm: true}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 1 {
		t.Errorf("skipped %d overlays, want the oci one, whose registry no host setting allows", st.Skipped)
	}
}

// A git base is refused before krusty could clone it, even when the
// clone would work (here from a local repo): nothing is cloned.
func TestGitBaseNeverBuilds(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where krusty would leave its clone
	src := t.TempDir()
	git(t, src, "init", "-q", "-b", "main")
	write(t, src, map[string]string{"base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": cm("remote", "k: v")})
	commit(t, src, "remote")
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, map[string]string{"app/kustomization.yaml": "resources:\n- file://" + src + "//base\n"})
	sha := commit(t, dir, "app")
	s, err := snapshot.FromCommit(context.Background(), dir, sha)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.Discover(s.FS, render.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := render.Render(context.Background(), s.FS, tree, []string{"app"}, render.Options{})
	if err != nil || rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), "is a remote git base") {
		t.Fatalf("a git base was not refused: %v %v", err, rs[0].Err)
	}
	if clones, _ := os.ReadDir(tmp); len(clones) > 0 {
		t.Errorf("something was cloned into %s: %v", tmp, clones)
	}
	p, st, err := Execute(context.Background(), Options{RepoDir: dir, Base: sha, Head: sha, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.FailFast != 2 || p.Overlays[0].Status != inventorydiff.Failed {
		t.Errorf("stats %+v, status %s: want the git base failed fast", st, p.Overlays[0].Status)
	}
}

// Progress counts every build up to the total, one call at a time, and
// the plan says how much it rendered.
func TestProgressAndWork(t *testing.T) {
	dir, base, head := imageBump(t)
	var calls [][2]int
	p, st, err := Execute(context.Background(), Options{RepoDir: dir, Base: base, Head: head,
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != st.Rendered || st.Rendered == 0 {
		t.Fatalf("%d progress calls for %d builds", len(calls), st.Rendered)
	}
	for i, c := range calls {
		if c != [2]int{i + 1, st.Rendered} {
			t.Errorf("call %d = %v, want %d of %d", i, c, i+1, st.Rendered)
		}
	}
	if w := p.Work; w == nil || w.Rendered != st.Rendered || w.Overlays != st.Overlays || w.Took <= 0 {
		t.Errorf("work %+v, stats %+v", p.Work, st)
	}
}

// TestFluxModeFromHeadChange: a change that adds the repository's first
// Flux Kustomization whose source is the repository turns Flux mode on,
// though head's other files are not searched (base, with only another
// source's, has none); a change elsewhere leaves it off.
func TestFluxModeFromHeadChange(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	ks := func(name, source string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name +
			"\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./apps/web\n  prune: true\n" +
			"  sourceRef:\n    kind: GitRepository\n    name: " + source + "\n"
	}
	write(t, dir, map[string]string{
		"apps/web/kustomization.yaml": "resources: [cm.yaml]\n",
		"apps/web/cm.yaml":            cm("web", "k: v"),
		"clusters/other.yaml":         ks("other", "another-repository"),
	})
	base := commit(t, dir, "base")
	write(t, dir, map[string]string{"apps/web/cm.yaml": cm("web", "k: w")})
	elsewhere := commit(t, dir, "a change elsewhere")
	write(t, dir, map[string]string{"clusters/web.yaml": ks("web", "flux-system")})
	added := commit(t, dir, "a Flux Kustomization")
	for _, tc := range []struct {
		head string
		want []string
	}{
		{elsewhere, []string{"apps/web"}},
		{added, []string{"flux-system/web"}},
	} {
		p, err := Run(context.Background(), Options{RepoDir: dir, Base: base, Head: tc.head})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range p.Overlays {
			got = append(got, o.Path)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("head %s plans %v, want %v", tc.head, got, tc.want)
		}
	}
}

// TestSchemaOnlyWhenABuildRuns: kyaml's OpenAPI schema is parsed only by
// a plan that builds (a fifth of a small plan's CPU): a plan whose
// builds all come from the render cache parses none, a plan with one
// miss parses it, and so does a plan with no cache. Not parallel: the
// schema is the process's.
func TestSchemaOnlyWhenABuildRuns(t *testing.T) {
	dir, base, head := imageBump(t)
	ctx := context.Background()
	forget := func() { _ = render.Exclusive(func() error { return nil }) } // resets the schema as it ends
	plan := func(what string, opts Options, wantParsed bool) Stats {
		t.Helper()
		forget()
		_, st, err := Execute(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := render.SchemaParsed(); got != wantParsed {
			t.Errorf("%s (%+v): schema parsed %v, want %v", what, st, got, wantParsed)
		}
		return st
	}
	opts := Options{RepoDir: dir, Base: base, Head: head, CacheDir: t.TempDir()}
	if st := plan("first plan, empty cache", opts, true); st.Rendered == 0 {
		t.Fatalf("first plan rendered nothing: %+v", st)
	}
	if st := plan("same plan again, every build cached", opts, false); st.CacheHits == 0 || st.Rendered != 0 {
		t.Errorf("second plan: %+v; want every render a cache hit", st)
	}
	write(t, dir, map[string]string{"base/deployment.yaml": strings.ReplaceAll(deployYAML, "IMAGE", "3")})
	opts.Head = commit(t, dir, "next push")
	if st := plan("next push, base cached, head not", opts, true); st.CacheHits == 0 || st.Rendered == 0 {
		t.Errorf("next push: %+v; want base's renders from the cache and head's built", st)
	}
	opts.CacheDir = ""
	plan("no cache", opts, true)
	forget()
}
