package plan

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/test/gittest"
)

// indexURL is the repository the histories' Applications name.
const indexURL = "https://github.com/example/fleet.git"

// history is a generated Argo CD repository: its files, and the
// Applications it declares by name (their files).
type history struct {
	rng   *rand.Rand
	files map[string]string
	apps  map[string]string // name -> the file declaring it
	next  int
}

func indexApp(name, path, rest string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %s, namespace: argocd}
spec:
  source: {repoURL: '%s', targetRevision: HEAD, path: %s%s}
  destination: {server: https://kubernetes.default.svc, namespace: %s}
`, name, indexURL, path, rest, name)
}

// newHistory starts a repository of a few Applications of every kind
// of source, under apps/ and apps/templates/ (which a Chart.yaml in apps/
// would make a chart's templates), and ApplicationSets of git directory
// and file generators.
func newHistory(seed uint64) *history {
	h := &history{rng: rand.New(rand.NewPCG(seed, 7)), files: map[string]string{}, apps: map[string]string{}}
	h.files["bases/web/kustomization.yaml"] = "resources: [cm.yaml]\n"
	h.files["bases/web/cm.yaml"] = cm("web", "v: '1'")
	h.files["sets/dirs.yaml"] = `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: dirs, namespace: argocd}
spec:
  generators: [{git: {repoURL: '` + indexURL + `', revision: HEAD, directories: [{path: 'gen/*'}]}}]
  template:
    metadata: {name: 'gen-{{path.basename}}'}
    spec:
      source: {repoURL: '` + indexURL + `', path: '{{path}}'}
      destination: {server: https://kubernetes.default.svc, namespace: '{{path.basename}}'}
`
	h.files["sets/files.yaml"] = `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: files, namespace: argocd}
spec:
  generators: [{git: {repoURL: '` + indexURL + `', revision: HEAD, files: [{path: 'cfg/*.json'}]}}]
  template:
    metadata: {name: 'cfg-{{name}}'}
    spec:
      source: {repoURL: '` + indexURL + `', path: '{{dir}}'}
      destination: {server: https://kubernetes.default.svc, namespace: '{{name}}'}
`
	for range 6 {
		h.addApp()
	}
	for range 2 {
		h.addGen()
	}
	h.files["cfg/a.json"] = `{"name": "a", "dir": "bases/web"}`
	return h
}

func (h *history) pick(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	if len(keys) == 0 {
		return ""
	}
	return keys[h.rng.IntN(len(keys))]
}

// addApp adds an Application of a random kind, with what it reads.
func (h *history) addApp() {
	h.next++
	n := "app" + strconv.Itoa(h.next)
	dir := "apps"
	if h.rng.IntN(3) == 0 {
		dir = "apps/templates"
	}
	file := dir + "/" + n + ".yaml"
	switch h.rng.IntN(3) {
	case 0: // kustomize, on the shared base
		h.files["k/"+n+"/kustomization.yaml"] = "resources: [../../bases/web, cm.yaml]\n"
		h.files["k/"+n+"/cm.yaml"] = cm(n, "v: '1'")
		h.files[file] = indexApp(n, "k/"+n, ", kustomize: {namePrefix: "+n+"-}")
	case 1: // a directory, recursed
		h.files["d/"+n+"/cm.yaml"] = cm(n, "v: '1'")
		h.files["d/"+n+"/sub/cm.yaml"] = cm(n+"-sub", "v: '1'")
		h.files[file] = indexApp(n, "d/"+n, ", directory: {recurse: true}")
	default: // a chart of its own
		h.files["c/"+n+"/Chart.yaml"] = "apiVersion: v2\nname: " + n + "\nversion: 0.1.0\n"
		h.files["c/"+n+"/values.yaml"] = "v: '1'\n"
		h.files["c/"+n+"/templates/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}'}\ndata: {v: '{{ .Values.v }}'}\n"
		h.files[file] = indexApp(n, "c/"+n, "")
	}
	h.apps[n] = file
}

// addGen adds a directory the dirs ApplicationSet makes an Application
// of.
func (h *history) addGen() {
	h.next++
	n := "g" + strconv.Itoa(h.next)
	h.files["gen/"+n+"/kustomization.yaml"] = "resources: [cm.yaml]\n"
	h.files["gen/"+n+"/cm.yaml"] = cm(n, "v: '1'")
}

// underDir deletes the files below dir.
func (h *history) deleteDir(dir string) {
	for p := range h.files {
		if strings.HasPrefix(p, dir+"/") {
			delete(h.files, p)
		}
	}
}

// mutate makes one random change of the kinds a history has (mutations)
// and says which.
func (h *history) mutate() string {
	if what := mutations[h.rng.IntN(len(mutations))](h, h.pick(h.apps)); what != "" {
		return what
	}
	h.addApp()
	return "add an Application"
}

// mutations change a history, app being one of its Applications; ""
// when the change does not apply.
var mutations = []func(h *history, app string) string{
	func(h *history, app string) string {
		h.addApp()
		return "add an Application"
	},
	func(h *history, app string) string {
		if app == "" || len(h.apps) < 2 {
			return ""
		}
		delete(h.files, h.apps[app])
		delete(h.apps, app)
		return "delete " + app
	},
	func(h *history, app string) string {
		if app == "" {
			return ""
		}
		to := "apps/renamed-" + app + ".yaml"
		if to == h.apps[app] {
			to = "apps/templates/" + app + ".yaml"
		}
		h.files[to] = h.files[h.apps[app]]
		delete(h.files, h.apps[app])
		h.apps[app] = to
		return "rename " + app
	},
	func(h *history, app string) string {
		if app == "" {
			return ""
		}
		f := h.apps[app]
		h.files[f] = strings.Replace(h.files[f], "namespace: "+app+"}", "namespace: "+app+"-"+strconv.Itoa(h.rng.IntN(3))+"}", 1)
		return "edit " + app + "'s destination"
	},
	// A file an Application or the ApplicationSets read.
	func(h *history, app string) string {
		var read []string
		for p := range h.files {
			for _, d := range []string{"k/", "d/", "gen/", "bases/"} {
				if strings.HasPrefix(p, d) && !strings.HasSuffix(p, "kustomization.yaml") {
					read = append(read, p)
				}
			}
		}
		if len(read) == 0 {
			return ""
		}
		slices.Sort(read)
		p := read[h.rng.IntN(len(read))]
		h.files[p] = cm("x"+strconv.Itoa(h.rng.IntN(5)), "v: '"+strconv.Itoa(h.rng.IntN(9))+"'")
		return "edit " + p
	},
	// A file added to, or deleted from, a directory source.
	func(h *history, app string) string {
		for _, p := range slices.Sorted(maps.Keys(h.files)) {
			if strings.HasPrefix(p, "d/") && strings.HasSuffix(p, "/cm.yaml") && !strings.Contains(p, "/sub/") {
				extra := strings.TrimSuffix(p, "cm.yaml") + "sub/extra-" + strconv.Itoa(h.rng.IntN(3)) + ".yaml"
				if _, ok := h.files[extra]; ok {
					delete(h.files, extra)
					return "delete " + extra
				}
				h.files[extra] = cm("extra", "v: '1'")
				return "add " + extra
			}
		}
		return ""
	},
	func(h *history, app string) string {
		h.files["bases/web/cm.yaml"] = cm("web", "v: '"+strconv.Itoa(h.rng.IntN(9))+"'")
		return "edit the shared base"
	},
	// A directory the dirs ApplicationSet lists, added or deleted.
	func(h *history, app string) string {
		var gens []string
		for p := range h.files {
			if strings.HasPrefix(p, "gen/") && strings.HasSuffix(p, "/kustomization.yaml") {
				gens = append(gens, strings.TrimSuffix(p, "/kustomization.yaml"))
			}
		}
		slices.Sort(gens)
		if len(gens) > 1 && h.rng.IntN(2) == 0 {
			g := gens[h.rng.IntN(len(gens))]
			h.deleteDir(g)
			return "delete " + g
		}
		h.addGen()
		return "add a generated directory"
	},
	// A file the files ApplicationSet reads, written or deleted.
	func(h *history, app string) string {
		f := "cfg/" + []string{"a", "b"}[h.rng.IntN(2)] + ".json"
		if _, ok := h.files[f]; ok && h.rng.IntN(3) == 0 {
			delete(h.files, f)
			return "delete " + f
		}
		h.files[f] = fmt.Sprintf(`{"name": %q, "dir": %q}`, strings.TrimSuffix(filepath.Base(f), ".json"), []string{"bases/web", "gen"}[h.rng.IntN(2)])
		return "write " + f
	},
	// A chart over the Applications of apps/templates/, or none.
	func(h *history, app string) string {
		if _, ok := h.files["apps/Chart.yaml"]; ok {
			delete(h.files, "apps/Chart.yaml")
			return "delete apps/Chart.yaml"
		}
		h.files["apps/Chart.yaml"] = "apiVersion: v2\nname: apps\nversion: 0.1.0\n"
		return "add apps/Chart.yaml"
	},
	func(h *history, app string) string {
		h.files["README.md"] = "step " + strconv.Itoa(h.rng.IntN(100)) + "\n"
		return "edit README.md"
	},
	// A kustomization reading one more file, or one fewer.
	func(h *history, app string) string {
		for _, p := range slices.Sorted(maps.Keys(h.files)) {
			if !strings.HasPrefix(p, "k/") || !strings.HasSuffix(p, "/kustomization.yaml") || h.rng.IntN(2) == 0 {
				continue
			}
			d := strings.TrimSuffix(p, "/kustomization.yaml")
			if strings.Contains(h.files[p], "extra.yaml") {
				h.files[p] = "resources: [../../bases/web, cm.yaml]\n"
				delete(h.files, d+"/extra.yaml")
				return d + " reads one file fewer"
			}
			h.files[p] = "resources: [../../bases/web, cm.yaml, extra.yaml]\n"
			h.files[d+"/extra.yaml"] = cm("extra-"+strconv.Itoa(h.rng.IntN(9)), "v: '1'")
			return d + " reads one file more"
		}
		return ""
	},
}

// commit writes the history's files into dir (deleting the others) and
// commits them.
func (h *history) commit(t *testing.T, dir, msg string) string {
	t.Helper()
	out := git(t, dir, "ls-files")
	for _, p := range strings.Fields(out) {
		if _, ok := h.files[p]; !ok {
			if err := os.Remove(filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	gittest.Write(t, dir, h.files)
	return commit(t, dir, msg)
}

// TestArgoCDIndexPlansAsNoCache: over generated histories of an Argo CD
// repository (Applications added, deleted, renamed and edited, the files
// they read edited, added and deleted, ApplicationSets' inputs, a chart
// appearing over Application files), a plan taking the render cache of
// plans before it plans what a plan with no cache plans: the cache the
// plan of the commit before left (its index serving the base), the cache
// of a plan some commits back (the base a diff away from the index), a
// cache warmed on the base (a push to the default branch), and none.
// Every few commits both are held to --full too.
func TestArgoCDIndexPlansAsNoCache(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			git(t, dir, "remote", "add", "origin", indexURL)
			h := newHistory(seed)
			commits := []string{h.commit(t, dir, "start")}
			ctx := context.Background()
			running := t.TempDir() // the cache every plan leaves to the next
			var kept []string      // copies of running, after each step
			plan := func(opts Options) *inventorydiff.Plan {
				t.Helper()
				opts.RepoDir, opts.Resolver = dir, notFound{}
				p, _, err := Execute(ctx, opts)
				if err != nil {
					t.Fatalf("%+v: %v", opts, err)
				}
				return p
			}
			for step := 1; step <= 12; step++ {
				var what []string
				for range 1 + h.rng.IntN(3) {
					what = append(what, h.mutate())
				}
				name := fmt.Sprintf("step %d (%s)", step, strings.Join(what, ", "))
				commits = append(commits, h.commit(t, dir, name))
				base, head := commits[len(commits)-2], commits[len(commits)-1]
				want := plan(Options{Base: base, Head: head})
				cache, how := running, "the cache of the plan before"
				switch r := h.rng.IntN(5); {
				case r <= 1 && len(kept) > 1:
					// A cache a few commits back: the base is a diff away.
					cache, how = copyDir(t, kept[h.rng.IntN(len(kept)-1)]), "a cache of a few commits back"
				case r == 2:
					plan(Options{Base: base, Head: base, CacheDir: running, Warm: true})
					how = "the cache warmed on the base"
				case r == 3:
					cache, how = t.TempDir(), "an empty cache"
				}
				got := plan(Options{Base: base, Head: head, CacheDir: cache})
				sameChanges(t, name+", "+how, want, got)
				if cache != running {
					plan(Options{Base: base, Head: head, CacheDir: running})
				}
				kept = append(kept, copyDir(t, running))
				if step%4 == 0 {
					sameChanges(t, name+", --full", plan(Options{Base: base, Head: head, Full: true}), want)
				}
			}
		})
	}
}

// copyDir copies the files of dir into a new directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return to
}
