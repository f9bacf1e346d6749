package argocd

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/gittest"
)

// indexRepo commits reuseFiles, then them with head's changes, and
// returns the repository and the two commits.
func indexRepo(t *testing.T, head map[string]string) (dir, base, hd string) {
	t.Helper()
	dir = t.TempDir()
	gittest.Git(t, dir, "init", "-q")
	gittest.Write(t, dir, reuseFiles)
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "base")
	gittest.Write(t, dir, head)
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "head")
	return dir, gittest.Git(t, dir, "rev-parse", "HEAD~"), gittest.Git(t, dir, "rev-parse", "HEAD")
}

// openSides opens two commits of dir as a plan does, in a process of
// their own (nothing read before is shared).
func openSides(t *testing.T, dir, base, head string) (*snapshot.Snapshot, *snapshot.Snapshot) {
	t.Helper()
	ctx := context.Background()
	blobs := snapshot.NewBlobs(dir)
	t.Cleanup(func() { blobs.Close() })
	bs, err := snapshot.Open(ctx, dir, base, blobs)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := snapshot.OpenFrom(ctx, bs, head)
	if err != nil {
		t.Fatal(err)
	}
	return bs, hs
}

// planWithIndex plans base..head with an engine taking data (an encoded
// index) and deriving the base from its commit from, whose diff with the
// base is changed.
func planWithIndex(t *testing.T, dir, base, head string, data []byte, from string) (*Engine, [2]*Result, [2]*snapshot.Snapshot) {
	t.Helper()
	ix, err := DecodeIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	bs, hs := openSides(t, dir, base, head)
	e := testEngine()
	if why := e.Use(ix); why != "" {
		t.Fatalf("the index is not used: %s", why)
	}
	changed := map[string]bool{}
	if from != base {
		fs, err := snapshot.OpenFrom(context.Background(), bs, from)
		if err != nil {
			t.Fatal(err)
		}
		changed = snapshot.Changed(bs.Index, fs.Index)
	}
	if err := e.Prior(bs.Rev, from, changed); err != nil {
		t.Fatal(err)
	}
	res, err := e.Plan(context.Background(), bs, hs, snapshot.Changed(bs.Index, hs.Index))
	if err != nil {
		t.Fatal(err)
	}
	return e, res, [2]*snapshot.Snapshot{bs, hs}
}

// indexOf is the encoded index of a plan of base..head of dir, with no
// index.
func indexOf(t *testing.T, dir, base, head string) []byte {
	t.Helper()
	bs, hs := openSides(t, dir, base, head)
	e := testEngine()
	res, err := e.Plan(context.Background(), bs, hs, snapshot.Changed(bs.Index, hs.Index))
	if err != nil {
		t.Fatal(err)
	}
	ix := e.Index(context.Background(), []*snapshot.Snapshot{bs, hs}, res[:])
	if ix == nil {
		t.Fatal("no index")
	}
	data, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIndexPlansAsDiscovery: a plan deriving its base from the index a
// plan before it kept, of the base itself or of the head (a diff away),
// plans what the plan without it plans (the full plan of the same sides,
// sameAsFull), and decodes the spec of no Application the change cannot
// reach: the index spares the parses.
func TestIndexPlansAsDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		head map[string]string
	}{
		{"an Application's file", map[string]string{"apps/web.yaml": reuseApp("web", "web", ", kustomize: {namePrefix: b-}")}},
		{"a file its kustomization reads", map[string]string{"web/cm.yaml": reuseCM("web", "2")}},
		{"a new Application", map[string]string{"apps/new.yaml": reuseApp("new", "other", "")}},
		{"a directory the ApplicationSet lists", map[string]string{"gen/c/kustomization.yaml": "resources: [cm.yaml]\n", "gen/c/cm.yaml": reuseCM("c", "1")}},
		{"the file an ApplicationSet reads", map[string]string{"config/x.json": `{"name": "x", "dir": "web"}`}},
		{"a chart over an Application's file", map[string]string{"apps/Chart.yaml": "apiVersion: v2\nname: apps\nversion: 0.1.0\n", "apps/templates/web.yaml": reuseApp("web2", "web", "")}},
		{"a file no Application reads", map[string]string{"README.md": "hello\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, base, head := indexRepo(t, tc.head)
			data := indexOf(t, dir, base, head)
			for _, from := range []string{base, head} {
				_, got, sides := planWithIndex(t, dir, base, head, data, from)
				sameAsFull(t, context.Background(), sides[0], sides[1], got)
				fromIndex := 0
				for i, r := range got {
					for _, tg := range r.Targets {
						if tg.Deferred && tg.facts != nil {
							fromIndex++
							if tg.spec.Load() != nil {
								t.Errorf("from %s: side %d: %s, which the change cannot reach, was decoded", from[:7], i, tg.Name())
							}
						}
					}
				}
				if fromIndex == 0 {
					t.Errorf("from %s: no Application the change cannot reach came from the index", from[:7])
				}
			}
		})
	}
}

// TestIndexRoundTrip: an index decodes to what encodes to the same.
func TestIndexRoundTrip(t *testing.T) {
	dir, base, head := indexRepo(t, map[string]string{"web/cm.yaml": reuseCM("web", "2")})
	data := indexOf(t, dir, base, head)
	ix, err := DecodeIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("re-encoded, %d bytes; first %d", len(again), len(data))
	}
	if got := ix.Commits(); !slices.Equal(got, []string{head, base}) {
		t.Errorf("commits %q, want head then base", got)
	}
}

// TestIndexOfOtherSettingsIsNotUsed: an engine whose settings differ
// (repoURLs, a targetRevision it no longer tracks) takes nothing of an
// index made under others.
func TestIndexOfOtherSettingsIsNotUsed(t *testing.T) {
	dir, base, head := indexRepo(t, map[string]string{"web/cm.yaml": reuseCM("web", "2")})
	ix, err := DecodeIndex(indexOf(t, dir, base, head))
	if err != nil {
		t.Fatal(err)
	}
	if why := New(Options{Repos: NewRepos(repoURL, "https://example.com/other"), Revisions: []string{"main"}}).Use(ix); why == "" {
		t.Error("an engine of other repoURLs used the index")
	}
	// reuseFiles track HEAD ("") only: ask about another.
	ix.revisions["release"] = true
	if why := testEngine().Use(ix); !strings.Contains(why, "release") {
		t.Errorf("an engine not tracking release used an index that does: %q", why)
	}
}

// TestDamagedIndexFailsWhatItReaches: an Application of the index whose
// object no longer decodes as the Application it was fails the target a
// change reaches, naming the cache, instead of planning anything else.
func TestDamagedIndexFailsWhatItReaches(t *testing.T) {
	dir, base, head := indexRepo(t, map[string]string{"web/cm.yaml": reuseCM("web", "2")})
	ix, err := DecodeIndex(indexOf(t, dir, base, head))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ix.files {
		for _, a := range f.decl.Applications {
			if a.Name == "web" {
				a.object = bytes.Replace(a.object, []byte(`"name":"web"`), []byte(`"name":"wob"`), 1)
			}
		}
	}
	data, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := planWithIndex(t, dir, base, head, data, base)
	for i, r := range got {
		web := r.Target("argocd/web")
		if web == nil || web.Err == nil || !strings.Contains(web.Err.Error(), "damaged") {
			t.Errorf("side %d: argocd/web %+v, want it failing with the damaged index", i, web)
		}
	}
}

// memIndex is the encoded index of a plan of reuseFiles, its head
// changing a ConfigMap and adding an Application, planned in memory.
func memIndex(t *testing.T) []byte {
	t.Helper()
	var sides [2]*snapshot.Snapshot
	for i, change := range []map[string]string{nil, {"web/cm.yaml": reuseCM("web", "2"), "apps/new.yaml": reuseApp("new", "other", "")}} {
		fsys := fstest.MapFS{}
		for p, data := range reuseFiles {
			fsys[p] = &fstest.MapFile{Data: []byte(data)}
		}
		for p, data := range change {
			fsys[p] = &fstest.MapFile{Data: []byte(data)}
		}
		s, err := snapshot.FromFS(fsys, []string{"base", "head"}[i])
		if err != nil {
			t.Fatal(err)
		}
		sides[i] = s
	}
	e := testEngine()
	res, err := e.Plan(context.Background(), sides[0], sides[1], snapshot.Changed(sides[0].Index, sides[1].Index))
	if err != nil {
		t.Fatal(err)
	}
	data, err := e.Index(context.Background(), sides[:], res[:]).Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIndexFormat pins the index's encoding (testdata/index.golden, the
// fuzzing seed): a change of it is a new format, whose indexMagic says
// so (an index of the old one then reads as damaged, never as another).
func TestIndexFormat(t *testing.T) {
	testkit.Golden(t, "testdata/index.golden", string(memIndex(t)))
}

// FuzzDecodeIndex: whatever the file holds, decoding it never fails
// otherwise than with an error, and what decodes encodes to what decodes
// and encodes the same.
func FuzzDecodeIndex(f *testing.F) {
	data, err := os.ReadFile("testdata/index.golden")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte(indexMagic))
	f.Add([]byte(indexMagic + "\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := DecodeIndex(data)
		if err != nil {
			return
		}
		enc, err := ix.Encode()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := DecodeIndex(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		enc2, err := again.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encodes to %q, then %q (%v)", enc, enc2, err)
		}
	})
}

// TestIndexKeepsEveryClosureField: the index writes every field of a
// closure but Err (a closure that failed is not kept): a field added to
// closure.Closure is written too, or the closures taken from the index
// lose it. A closure of every field set reads back alike.
func TestIndexKeepsEveryClosureField(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[closure.Closure]().Fields() {
		fields = append(fields, f.Name)
	}
	if want := []string{"Overlay", "Paths", "Remote", "Unbounded", "OpenAPI", "Helm", "Err"}; !slices.Equal(fields, want) {
		t.Fatalf("closure.Closure has fields %q; the index writes %q: write the new ones (Encode, DecodeIndex)", fields, want)
	}
	f := &fileRec{path: "apps/a.yaml", id: "0123456789abcdef0123456789abcdef01234567"}
	a, err := Parse(map[string]any{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"source": map[string]any{"repoURL": repoURL, "path": "a"}}}, f.path)
	if err != nil {
		t.Fatal(err)
	}
	a.facts = &appFacts{renders: true}
	f.decl.Applications = []*Application{a}
	c := &closure.Closure{Overlay: a.ID(), Paths: []string{".", "a", "apps", "apps/a.yaml"}, Remote: []closure.Remote{{Ref: "https://example.com/x", Field: "resources", File: "a/kustomization.yaml"}},
		Unbounded: "why", OpenAPI: true, Helm: true}
	ix := &Index{revisions: map[string]bool{}, files: map[fileKey]*fileRec{{f.path, f.id}: f},
		commits: []*commitState{{id: "c", files: []*fileRec{f}, closures: map[*Application]*closureRec{a: {c: c, own: []string{"apps/a.yaml"}, listed: []string{"a"}, may: mayNot}}}}}
	data, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	got := back.commits[0].closures[back.commits[0].files[0].decl.Applications[0]]
	if got == nil || !reflect.DeepEqual(got.c, c) || !slices.Equal(got.own, []string{"apps/a.yaml"}) || !slices.Equal(got.listed, []string{"a"}) || got.may != mayNot {
		t.Errorf("read back %+v, want %+v", got, c)
	}
}
