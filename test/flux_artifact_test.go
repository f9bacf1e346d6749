package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

// Flux builds a Kustomization from source-controller's artifact of its
// GitRepository, not from the commit (testdata/flux-artifact, two apps
// whose directories Flux lists): what the default exclusions, the
// .sourceignore files and spec.ignore leave out does not exist for the
// build, and a change of those rules is planned as the objects it adds
// or removes. Each step is one commit, planned against the one before,
// changed-only as --full.
func TestFluxArtifactAsSourceControllerBuildsIt(t *testing.T) {
	kplan := buildKplan(t)
	r := newFluxRepo(t, "flux-artifact")
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  a: b\n"
	}
	ignore := "# a .sourceignore replaces Flux's default exclusions: these keep them\n**/.sops.yaml\n.github/\napps/web/scratch.yaml\n"
	sync := "clusters/dev/flux-system/gotk-sync.yaml"
	gitRepo := "source.toolkit.fluxcd.io_v1_GitRepository|flux-system|flux-system"
	type want struct {
		added  map[string][]string // target → keys added, changed or pruned
		failed map[string]string   // target → what its error names
		unread []string
	}
	steps := []struct {
		name   string
		change func()
		want   want
	}{{
		// sourceignore.go:29-35 (fluxcd/pkg): **/.sops.yaml and .github/
		// are left out by default; Flux's generator would fail to decode
		// either (a .sops.yaml beside the app failed the target).
		name: "sops file and CI folder",
		change: func() {
			gittest.Write(t, r.Dir, map[string]string{
				"apps/web/.sops.yaml":                      "creation_rules:\n  - path_regex: .*\n    age: age1example\n",
				"apps/site/.github/workflows/release.yaml": "on: push\njobs: {}\n",
			})
		},
		want: want{unread: []string{"apps/site/.github/workflows/release.yaml", "apps/web/.sops.yaml"}},
	}, {
		// A file a .sourceignore excludes is not applied.
		name: "sourceignored file",
		change: func() {
			gittest.Write(t, r.Dir, map[string]string{".sourceignore": ignore, "apps/web/scratch.yaml": cm("scratch")})
		},
		want: want{unread: []string{"apps/web/scratch.yaml"}},
	}, {
		// Removing its line applies it.
		name: "ignore line removed",
		change: func() {
			gittest.Write(t, r.Dir, map[string]string{".sourceignore": strings.Replace(ignore, "apps/web/scratch.yaml\n", "", 1)})
		},
		want: want{added: map[string][]string{"flux-system/web": {"~G_v1_ConfigMap|web|scratch"}}},
	}, {
		name: "spec.ignore",
		change: func() {
			r.Replace(sync, "  url: ssh://git@example.invalid/fleet\n", "  url: ssh://git@example.invalid/fleet\n  ignore: |\n    /apps/site/extra.yaml\n")
			gittest.Write(t, r.Dir, map[string]string{"apps/site/extra.yaml": cm("extra")})
		},
		want: want{added: map[string][]string{"flux-system/flux-system": {gitRepo}}, unread: []string{"apps/site/extra.yaml"}},
	}, {
		// The change is in the GitRepository's file, which the site's
		// build does not read: its artifact's rules changed.
		name: "spec.ignore removed",
		change: func() {
			r.Replace(sync, "  ignore: |\n    /apps/site/extra.yaml\n", "")
		},
		want: want{added: map[string][]string{"flux-system/flux-system": {gitRepo}, "flux-system/site": {"~G_v1_ConfigMap|site|extra"}}},
	}, {
		// With any pattern the defaults are off (fluxcd/pkg
		// artifact/storage/archive.go:68-77): without its line, the
		// .sops.yaml is in the artifact and Flux's build of web fails.
		name: "defaults replaced",
		change: func() {
			gittest.Write(t, r.Dir, map[string]string{".sourceignore": ".github/\n"})
		},
		want: want{failed: map[string]string{"flux-system/web": ".sops.yaml"}},
	}}
	for _, st := range steps {
		st.change()
		gittest.Git(t, r.Dir, "add", "-A")
		gittest.Git(t, r.Dir, "commit", "-qm", st.name)
		t.Run(st.name, func(t *testing.T) {
			p, _ := r.diff(kplan, "HEAD~1", "HEAD", "json", "--fail-on-error=false")
			added := map[string][]string{}
			failed := map[string]string{}
			for _, o := range p.Overlays {
				if o.Error != "" {
					failed[o.Path] = o.Error
				}
				if len(o.Added)+len(o.Changed)+len(o.Pruned) > 0 {
					added[o.Path] = slices.Concat(o.Added, o.Changed, o.Pruned)
				}
			}
			for id, keys := range st.want.added {
				if !slices.Equal(added[id], keys) {
					t.Errorf("%s plans %v, want %v", id, added[id], keys)
				}
			}
			if len(added) != len(st.want.added) {
				t.Errorf("changed targets %v, want %v", added, st.want.added)
			}
			for id, e := range failed {
				if w, ok := st.want.failed[id]; !ok || !strings.Contains(e, w) {
					t.Errorf("%s fails: %s (want %q)", id, e, w)
				}
			}
			for id := range st.want.failed {
				if failed[id] == "" {
					t.Errorf("%s does not fail; Flux's build of it does", id)
				}
			}
			var unread []string
			for _, u := range p.Unread {
				unread = append(unread, u.Path)
			}
			if !slices.Equal(unread, st.want.unread) {
				t.Errorf("unread %q, want %q", unread, st.want.unread)
			}
			_, changedOnly := r.diff(kplan, "HEAD~1", "HEAD", "text", "--fail-on-error=false")
			_, full := r.diff(kplan, "HEAD~1", "HEAD", "text", "--fail-on-error=false", "--full")
			if changedOnly != full {
				t.Errorf("changed-only plan:\n%s\n--full:\n%s", changedOnly, full)
			}
		})
	}
}
