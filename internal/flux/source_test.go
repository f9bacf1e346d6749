package flux

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/sourceignore"

	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/testkit"
)

// upstreamArtifact is the oracle of TestArtifactAsSourceControllerBuildsIt:
// the files source-controller archives from the checkout at dir, with
// fluxcd/pkg's own LoadIgnorePatterns reading the .sourceignore files
// from disk (source-controller v1.9.1
// internal/controller/gitrepository_controller.go:912-926), and
// SourceIgnoreFilter and Archive's walk as fluxcd/pkg artifact v0.18.1
// writes them (artifact/storage/archive.go:68-77 and 112-119: that module
// does not build in kplan's module, its go.mod replaces go-digest).
func upstreamArtifact(t *testing.T, dir string, ignore *string) []string {
	t.Helper()
	domain := strings.Split(dir, string(filepath.Separator))
	ps, err := sourceignore.LoadIgnorePatterns(dir, domain)
	if err != nil {
		t.Fatal(err)
	}
	if ignore != nil {
		ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(*ignore), domain)...)
	}
	matcher := sourceignore.NewDefaultMatcher(ps, domain)
	if len(ps) > 0 {
		matcher = sourceignore.NewMatcher(append(sourceignore.VCSPatterns(domain), ps...))
	}
	var out []string
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if m := fi.Mode(); !(m.IsRegular() || m.IsDir()) {
			return nil
		}
		if matcher.Match(strings.Split(p, string(filepath.Separator)), fi.IsDir()) || fi.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// Each case is a rule of source-controller's artifact; the files it
// keeps are checked against the case's want and against the oracle
// (upstreamArtifact) on the same tree written to disk. A file whose
// content starts with "-> " is a symlink to the rest.
func TestArtifactAsSourceControllerBuildsIt(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		files  map[string]string
		ignore *string
		want   []string
	}{{
		// fluxcd/pkg sourceignore v0.18.0 sourceignore.go:29-35 and
		// artifact/storage/archive.go:68-70: without a pattern, VCS, CI,
		// image and archive files, .sops.yaml, .goreleaser.yml and
		// .flux.yaml are left out, at any level.
		name: "default exclusions",
		files: map[string]string{
			"apps/web/cm.yaml": "a", "apps/web/.sops.yaml": "b", "apps/web/.flux.yaml": "c", ".goreleaser.yml": "d",
			".github/workflows/ci.yaml": "e", "apps/site/.github/x.yaml": "f", ".gitlab-ci.yml": "g", "apps/.circleci/config.yml": "h",
			"docs/logo.png": "i", "charts/x.tar.gz": "j", ".gitignore": "k", "apps/.travis.yml": "l", "cloudbuild.yaml": "m",
		},
		want: []string{"apps/web/cm.yaml"},
	}, {
		// archive.go:70-73, and upstream's own case "custom"
		// (artifact/storage/archive_test.go:170-186): any pattern, here a
		// .sourceignore's, replaces the defaults but the VCS ones.
		name: "a .sourceignore turns the defaults off",
		files: map[string]string{
			"apps/web/cm.yaml": "a", "apps/web/.sops.yaml": "b", ".github/workflows/ci.yaml": "e", ".gitignore": "k",
			"apps/web/.sourceignore": "scratch.yaml\n", "apps/web/scratch.yaml": "s",
		},
		want: []string{".github/workflows/ci.yaml", "apps/web/.sops.yaml", "apps/web/.sourceignore", "apps/web/cm.yaml"},
	}, {
		// A comment-only .sourceignore reads as no pattern
		// (sourceignore.go:88-99): the defaults stay.
		name: "a .sourceignore of comments only",
		files: map[string]string{
			"apps/web/cm.yaml": "a", "apps/web/.sops.yaml": "b", ".sourceignore": "# nothing\n\n",
		},
		want: []string{".sourceignore", "apps/web/cm.yaml"},
	}, {
		// sourceignore.go:114-140 (LoadIgnorePatterns): a file's patterns
		// are scoped to its directory; "/x" anchors there.
		name: "nested files are scoped to their directory",
		files: map[string]string{
			"apps/web/.sourceignore": "config.yaml\n/top.yaml\n", "apps/web/config.yaml": "a", "apps/web/sub/config.yaml": "b",
			"apps/web/top.yaml": "c", "apps/web/sub/top.yaml": "d", "apps/other/config.yaml": "e", "top.yaml": "f",
		},
		want: []string{"apps/other/config.yaml", "apps/web/.sourceignore", "apps/web/sub/top.yaml", "top.yaml"},
	}, {
		// LoadIgnorePatterns reads the top's file first, then the
		// subdirectories' in name order, depth first; the matcher
		// lets the last matching pattern win (gitignore/matcher.go).
		name: "deeper files win",
		files: map[string]string{
			".sourceignore": "!apps/web/a.yaml\n*.yaml\n", "apps/web/.sourceignore": "!b.yaml\n", "apps/web/a.yaml": "a",
			"apps/web/b.yaml": "b", "apps/web-x/.sourceignore": "!c.yaml\n", "apps/web-x/c.yaml": "c", "apps/web/z/.sourceignore": "b.yaml\n",
			"apps/web/z/b.yaml": "zb",
		},
		want: []string{".sourceignore", "apps/web-x/.sourceignore", "apps/web-x/c.yaml", "apps/web/.sourceignore", "apps/web/b.yaml", "apps/web/z/.sourceignore"},
	}, {
		// archive.go:112-119: a matching directory is not skipped, each
		// file is matched on its own: a negation brings one back (git
		// would not).
		name: "negation below an excluded directory",
		files: map[string]string{
			".sourceignore": "apps/\n!apps/web/keep.yaml\n", "apps/web/keep.yaml": "a", "apps/web/drop.yaml": "b",
		},
		want: []string{".sourceignore", "apps/web/keep.yaml"},
	}, {
		// gitrepository_controller.go:921-923: spec.ignore, scoped to the
		// top, after the files (so it overrules them: a.yaml comes back);
		// the monorepo pattern of Flux's docs.
		name: "spec.ignore",
		files: map[string]string{
			"clusters/prod/a.yaml": "a", "clusters/staging/b.yaml": "b", "apps/c.yaml": "c", "apps/.sops.yaml": "s",
			"clusters/prod/.sourceignore": "a.yaml\n",
		},
		ignore: str("/*\n!/clusters/\n/clusters/*\n!/clusters/prod/\n"),
		want:   []string{"clusters/prod/.sourceignore", "clusters/prod/a.yaml"},
	}, {
		// archive.go:112-115: symlinks are not archived.
		name: "symlinks",
		files: map[string]string{
			"apps/web/cm.yaml": "a", "apps/web/link.yaml": "-> cm.yaml", "apps/shared": "-> web",
		},
		want: []string{"apps/web/cm.yaml"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, data := range tc.files {
				dst := filepath.Join(dir, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				if target, ok := strings.CutPrefix(data, "-> "); ok {
					err = os.Symlink(target, dst)
				} else {
					err = os.WriteFile(dst, []byte(data), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := upstreamArtifact(t, dir, tc.ignore); !slices.Equal(got, tc.want) {
				t.Fatalf("source-controller's rules keep %q; the case says %q", got, tc.want)
			}
			ctx := context.Background()
			s, err := snapshot.FromWorkingTree(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			var g *GitRepository
			if tc.ignore != nil {
				g = &GitRepository{Namespace: "flux-system", Name: "flux-system", Ignore: tc.ignore}
			}
			src := New(Options{}).newSources(s, nil).of(ctx, g)
			if src.err != nil {
				t.Fatal(src.err)
			}
			if got := src.snap.Index.Paths(); !slices.Equal(got, tc.want) {
				t.Errorf("kplan's artifact holds %q, want %q", got, tc.want)
			}
			for _, p := range tc.want {
				if _, err := src.snap.ReadFile(ctx, p); err != nil {
					t.Errorf("the artifact's build cannot read %s: %v", p, err)
				}
			}
		})
	}
}

// spec.include of a GitRepository that is this repository copies its
// artifact (its own rules applied) into the artifact; of another, it is
// named as not evaluated; onto a path the repository holds, it fails in
// source-controller and is named too.
func TestArtifactIncludes(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{
		"apps/web/cm.yaml": "a", "shared/base/cm.yaml": "b", "shared/base/.sops.yaml": "c", "shared/other/x.yaml": "d",
	}
	dir := t.TempDir()
	for p, data := range files {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := snapshot.FromWorkingTree(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	self := GitRepository{Namespace: "flux-system", Name: "flux-system", URL: "ssh://git@example.invalid/fleet", Ref: `{"branch":"main"}`}
	same := GitRepository{Namespace: "flux-system", Name: "shared", URL: self.URL, Ref: self.Ref}
	for _, tc := range []struct {
		name      string
		include   []Include
		want      []string
		wantNotes []string
	}{{
		name:    "this repository",
		include: []Include{{Repository: "shared", FromPath: "shared/base", ToPath: "vendor/base"}},
		want:    []string{"apps/web/cm.yaml", "shared/base/cm.yaml", "shared/other/x.yaml", "vendor/base/cm.yaml"},
	}, {
		name:      "another repository",
		include:   []Include{{Repository: "elsewhere"}},
		want:      []string{"apps/web/cm.yaml", "shared/base/cm.yaml", "shared/other/x.yaml"},
		wantNotes: []string{"GitRepository flux-system/flux-system includes GitRepository flux-system/elsewhere at elsewhere, which kplan does not evaluate: its artifact is not this repository"},
	}, {
		name:      "onto the repository",
		include:   []Include{{Repository: "shared", ToPath: "shared"}},
		want:      []string{"apps/web/cm.yaml", "shared/base/cm.yaml", "shared/other/x.yaml"},
		wantNotes: []string{"GitRepository flux-system/flux-system includes GitRepository flux-system/shared at shared, which kplan does not evaluate: the repository holds shared"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := self
			g.Include = tc.include
			src := New(Options{}).newSources(s, []GitRepository{g, same}).of(ctx, &g)
			if src.err != nil {
				t.Fatal(src.err)
			}
			if got := src.snap.Index.Paths(); !slices.Equal(got, tc.want) {
				t.Errorf("artifact %q, want %q", got, tc.want)
			}
			if len(src.notes) != len(tc.wantNotes) {
				t.Fatalf("notes %q, want %q", src.notes, tc.wantNotes)
			}
			for i, n := range tc.wantNotes {
				if !strings.HasPrefix(src.notes[i], n) {
					t.Errorf("note %q, want it to start %q", src.notes[i], n)
				}
			}
		})
	}
}

// The targets, the kustomization Flux generates and the charts of the
// repository see the artifact: a .sourceignored manifest is not listed,
// a .sourceignored chart template not rendered.
func TestBuildFromTheArtifact(t *testing.T) {
	s := testkit.Snapshot(t, "test", map[string]string{
		"clusters/dev/flux-system/gotk-sync.yaml": `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: flux-system, namespace: flux-system}
spec:
  url: ssh://git@example.invalid/fleet
  ignore: |
    /apps/web/scratch.yaml
    **/.sops.yaml
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: flux-system, namespace: flux-system}
spec:
  path: ./clusters/dev
  sourceRef: {kind: GitRepository, name: flux-system}
`,
		"clusters/dev/flux-system/kustomization.yaml": "resources: [gotk-sync.yaml]\n",
		"clusters/dev/web.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: web, namespace: flux-system}
spec:
  path: ./apps/web
  targetNamespace: web
  sourceRef: {kind: GitRepository, name: flux-system}
`,
		"apps/web/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
		"apps/web/scratch.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: scratch}\n",
		"apps/web/.sops.yaml":    "creation_rules: []\n",
		"apps/web/release.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: app}
spec:
  chart:
    spec:
      chart: ./charts/app
      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
`,
		"charts/app/Chart.yaml":          "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"charts/app/templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-chart}\n",
		"charts/app/templates/more.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored-template}\n",
		"charts/.sourceignore":           "app/templates/more.yaml\n",
	})
	res := build(t, s)
	web := res.Target("flux-system/web")
	if web == nil || web.Err != nil {
		t.Fatalf("web: %+v", web)
	}
	var names []string
	for _, o := range web.Objects {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(names)
	if want := []string{"ConfigMap/from-chart", "ConfigMap/settings", "HelmRelease/app"}; !slices.Equal(names, want) {
		t.Errorf("web applies %q, want %q (scratch.yaml is ignored by spec.ignore, the template by charts/.sourceignore)", names, want)
	}
	if !slices.Contains(web.Closure.Paths, "charts/.sourceignore") {
		t.Errorf("web's closure %q does not read the .sourceignore", web.Closure.Paths)
	}
}
