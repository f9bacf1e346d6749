// Command fluxconformance replays Flux repositories through the real Flux
// controllers and compares what they apply with kplan's plan of the same
// commit, target by target (docs/flux.md, "The real controllers as the
// oracle").
//
// For each case (cases.txt: a repository, commits, the cluster path of
// its root Kustomization) and commit it starts the test apiserver
// (internal/testcluster), installs the CRDs of source-controller,
// kustomize-controller and helm-controller (each built from its Go
// module), serves the repository over git smart HTTP on loopback, runs
// the three controllers as processes, creates the GitRepository and root
// Kustomization flux bootstrap would (wait: false: no Pods run, so no
// Deployment ever becomes ready), waits until the controllers settle,
// reads back every object labelled by kustomize-controller or
// helm-controller, and compares it with `kplan diff --flux --full -o json`
// from an empty commit to that commit.
//
// Run it with `make conformance-flux` (it is not part of `make test`).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/test/githttp"
)

// testCase is one line of the cases file.
type testCase struct {
	Name    string   // e.g. flux2-kustomize-helm-example
	Source  string   // a git bundle, a bare repository or a clone
	Commits []string // revisions to replay
	Path    string   // the root Kustomization's path, e.g. clusters/production
	Cluster string   // the prefix of kplan's targets of that path ("production: "), "-" for all
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fluxconformance:", err)
		os.Exit(1)
	}
}

func run() error {
	root, _ := filepath.Abs("../..")
	cases := flag.String("cases", "cases.txt", "cases file: name source commits(,) path cluster per line")
	only := flag.String("only", "", "run only the cases whose name contains one of these (comma-separated)")
	out := flag.String("out", filepath.Join(os.TempDir(), "fluxconformance"), "where results and logs go")
	kplanBin := flag.String("kplan", "", "kplan binary (default: built from the main module)")
	settle := flag.Duration("settle", 20*time.Second, "how long nothing may change for the controllers to count as settled")
	limit := flag.Duration("limit", 4*time.Minute, "longest wait for the controllers per commit")
	rounds := flag.Int("rounds", 6, "how many times namespaces and CRDs the cluster lacks are created and the controllers asked again")
	maxCommits := flag.Int("commits", 0, "replay at most this many commits of each case (0: all)")
	skip := flag.String("skip", "", "controllers not to build or run (comma-separated; their CRDs are installed)")
	flag.Parse()
	ctx := context.Background()
	tcs, err := readCases(*cases, root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	cache := filepath.Join(must(os.UserCacheDir()), "kplan", "flux")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	bins := map[string]string{}
	var crds []string
	for _, c := range controllers {
		if !slices.Contains(strings.Split(*skip, ","), c.Name) {
			slog.Info("building", "controller", c.Name, "version", c.Version)
			bin, err := c.build(ctx, cache)
			if err != nil {
				return err
			}
			bins[c.Name] = bin
		}
		files, err := c.crds(ctx)
		if err != nil {
			return err
		}
		crds = append(crds, files...)
	}
	if *kplanBin == "" {
		*kplanBin = filepath.Join(*out, "kplan")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", *kplanBin, "./cmd/kplan")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build kplan: %v\n%s", err, b)
		}
	}
	var results []result
	for _, tc := range tcs {
		if !slices.ContainsFunc(strings.Split(*only, ","), func(o string) bool { return strings.Contains(tc.Name, o) }) {
			continue
		}
		commits := tc.Commits
		if *maxCommits > 0 && len(commits) > *maxCommits {
			commits = commits[:*maxCommits]
		}
		for _, commit := range commits {
			r, err := replay(ctx, tc, commit, bins, crds, *kplanBin, filepath.Join(*out, tc.Name), *settle, *limit, *rounds)
			if err != nil {
				r.Error = err.Error()
				slog.Error("replay", "case", tc.Name, "commit", commit, "err", err)
			}
			results = append(results, r)
			printResult(os.Stdout, r)
		}
	}
	b, _ := json.MarshalIndent(results, "", "  ")
	return os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func readCases(file, root string) ([]testCase, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []testCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: want name source commits path cluster", file, n)
		}
		src := os.ExpandEnv(f[1])
		if !filepath.IsAbs(src) {
			src = filepath.Join(root, src)
		}
		cluster := f[4]
		if cluster != "-" && !strings.Contains(cluster, "/") {
			cluster += ": " // a Flux cluster name
		}
		out = append(out, testCase{Name: f[0], Source: src, Commits: strings.Split(f[2], ","), Path: f[3], Cluster: cluster})
	}
	return out, sc.Err()
}

// replay runs one commit of tc through the controllers and kplan.
func replay(ctx context.Context, tc testCase, rev string, bins map[string]string, crds []string, kplanBin, out string, settle, limit time.Duration, rounds int) (r result, err error) {
	r = result{Case: tc.Name, Path: tc.Path, Cluster: tc.Cluster}
	work, err := os.MkdirTemp("", "fluxconf-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(work)
	source := tc.Source
	if fixture(source) {
		charts, stop := testchart.StartRepo()
		defer stop()
		if source, err = fixtureRepo(ctx, tc.Source, filepath.Join(work, "fixture"), charts); err != nil {
			return r, err
		}
	}
	clone := filepath.Join(work, "clone")
	if err := git(ctx, "", "clone", "-q", "--no-checkout", source, clone); err != nil {
		return r, err
	}
	sha, err := gitOut(ctx, clone, "rev-parse", rev+"^{commit}")
	if err != nil {
		return r, err
	}
	r.Commit = sha
	logDir := filepath.Join(out, sha[:12])
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return r, err
	}
	r.Logs = logDir
	// The served repository: a bare clone whose main is the commit.
	served := filepath.Join(work, "git", "repo.git")
	if err := git(ctx, "", "clone", "-q", "--bare", clone, served); err != nil {
		return r, err
	}
	if err := git(ctx, served, "update-ref", "refs/heads/main", sha); err != nil {
		return r, err
	}
	srv, err := githttp.New(filepath.Join(work, "git"), "")
	if err != nil {
		return r, err
	}
	defer srv.Close()

	// kplan's side first: it takes seconds.
	r.Plan, err = kplanPlan(ctx, kplanBin, clone, sha, tc.Cluster)
	if err != nil {
		return r, err
	}

	c, err := testcluster.StartContext(ctx)
	if err != nil {
		return r, err
	}
	defer c.Stop()
	k, err := newKube(c.Config)
	if err != nil {
		return r, err
	}
	if err := k.installCRDs(ctx, crds); err != nil {
		return r, err
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, ctl := range controllers {
		if bins[ctl.Name] == "" {
			continue // -skip
		}
		if _, err := ctl.start(cctx, bins[ctl.Name], c.Kubeconfig, logDir); err != nil {
			return r, err
		}
	}
	if err := k.create(ctx, bootstrap(srv.URL+"/repo.git", sha, tc.Path)); err != nil {
		return r, err
	}
	state, err := k.waitSettled(ctx, settle, limit)
	r.State = state
	if err != nil {
		return r, err
	}
	// A target applying into a namespace no target creates fails on an
	// empty cluster; a live cluster may have it. Both are reported: the
	// namespaces are created and the controllers asked again.
	// Likewise a custom resource whose CRD a chart installs (charts on the
	// internet cannot be fetched here): a CRD accepting any object is
	// created. Several rounds (-rounds), as each may uncover more.
	for round := 0; round < rounds; round++ {
		ns, kinds := missingNamespaces(r.State), missingKinds(r.State)
		ns = slices.DeleteFunc(ns, func(n string) bool { return slices.Contains(r.CreatedNamespaces, n) })
		kinds = slices.DeleteFunc(kinds, func(n string) bool { return slices.Contains(r.CreatedCRDs, n) })
		if len(ns)+len(kinds) == 0 {
			break
		}
		if r.FirstState == "" {
			r.FirstState = r.State
		}
		r.CreatedNamespaces = append(r.CreatedNamespaces, ns...)
		r.CreatedCRDs = append(r.CreatedCRDs, kinds...)
		if err := k.createCRDs(ctx, kinds); err != nil {
			return r, err
		}
		if err := k.createNamespaces(ctx, ns); err != nil {
			return r, err
		}
		if r.State, err = k.waitSettled(ctx, settle, limit); err != nil {
			return r, err
		}
	}
	applied, err := k.applied(ctx)
	if err != nil {
		return r, err
	}
	r.compare(applied)
	return r, nil
}

// bootstrap is what `flux bootstrap` (or a FluxInstance's sync) creates:
// the controllers' service accounts and their cluster-admin binding
// (fluxcd/flux2 manifests/rbac/reconciler.yaml: multi-tenant
// Kustomizations impersonate kustomize-controller), the GitRepository of
// the repository and the root Kustomization of the cluster path, here at
// the commit replayed. The repository's own
// flux-system objects replace them once applied (its URL is GitHub's,
// which this harness cannot reach: the artifact already fetched stays).
func bootstrap(url, sha, path string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: kustomize-controller
  namespace: flux-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: helm-controller
  namespace: flux-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cluster-reconciler-flux-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: ServiceAccount
  name: kustomize-controller
  namespace: flux-system
- kind: ServiceAccount
  name: helm-controller
  namespace: flux-system
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 60m
  url: %s
  ref:
    commit: %s
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 60m
  path: ./%s
  prune: true
  wait: false
  sourceRef:
    kind: GitRepository
    name: flux-system
`, url, sha, strings.TrimPrefix(path, "./"))
}

func git(ctx context.Context, dir string, args ...string) error {
	_, err := gitOut(ctx, dir, args...)
	return err
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, b)
	}
	return strings.TrimSpace(string(b)), nil
}

// planTarget is one target of kplan's plan.
type planTarget struct {
	Error   string
	Notes   []string
	Objects map[string]map[string]any
}

// kplanPlan plans sha from an empty commit (every object added, with its
// YAML) and returns the targets whose name starts with cluster ("-": all
// of them), by name less the "cluster: " prefix (a Flux target is
// "ns/name" of its Kustomization).
func kplanPlan(ctx context.Context, kplanBin, clone, sha, cluster string) (map[string]*planTarget, error) {
	empty, err := gitOut(ctx, clone, "commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", "empty")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, kplanBin, "diff", "-C", clone, "--base", empty, "--head", sha, "--flux", "--full", "--fail-on-error=false", "-o", "json", "--remote-hosts", "127.0.0.1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kplan diff: %v: %s", err, stderr.String())
	}
	var plan struct {
		Overlays []struct {
			Path      string            `json:"path"`
			Error     string            `json:"error"`
			Failure   string            `json:"failure"`
			Notes     []string          `json:"notes"`
			Added     []string          `json:"added"`
			AddedYAML map[string]string `json:"addedYaml"`
			Head      struct {
				Error string `json:"error"`
			} `json:"head"`
		} `json:"overlays"`
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		return nil, fmt.Errorf("kplan diff output: %w", err)
	}
	out := map[string]*planTarget{}
	for _, o := range plan.Overlays {
		if cluster != "-" && !strings.HasPrefix(o.Path, cluster) {
			continue
		}
		_, name, ok := strings.Cut(o.Path, ": ")
		if !ok {
			name = o.Path
		}
		t := &planTarget{Error: strings.TrimSpace(o.Head.Error + " " + o.Error + " " + o.Failure), Notes: o.Notes, Objects: map[string]map[string]any{}}
		for _, key := range o.Added {
			obj, err := parseObject(o.AddedYAML[key])
			if err != nil || obj == nil {
				obj = map[string]any{}
			}
			t.Objects[planKey(key)] = obj
		}
		out[name] = t
	}
	return out, nil
}

// planKey turns kplan's object key (group_version_Kind|ns|name, ~G for
// the core group) into keyOf's form.
func planKey(k string) string {
	parts := strings.SplitN(k, "|", 3)
	if len(parts) != 3 {
		return k
	}
	gvk := strings.Split(parts[0], "_")
	group, kind := gvk[0], gvk[len(gvk)-1]
	if group == "~G" {
		group = ""
	}
	return keyOf(group, kind, parts[1], parts[2])
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fixture says whether source is a directory of files (one of kplan's
// test fixtures) rather than a git repository or bundle.
func fixture(source string) bool {
	st, err := os.Stat(source)
	if err != nil || !st.IsDir() {
		return false
	}
	_, err = os.Stat(filepath.Join(source, ".git"))
	head, _ := os.Stat(filepath.Join(source, "HEAD"))
	return err != nil && head == nil
}

// fixtureRepo makes a git repository of the fixture dir (as kplan's tests
// do): CHARTS_URL replaced by the loopback chart repository, which
// serves each chart under charts/ at version 1.0.0.
func fixtureRepo(ctx context.Context, dir, to string, charts *testchart.Repo) (string, error) {
	if out, err := exec.CommandContext(ctx, "cp", "-r", dir, to).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %v: %s", dir, err, out)
	}
	err := filepath.WalkDir(to, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), "CHARTS_URL") {
			return os.WriteFile(p, []byte(strings.ReplaceAll(string(data), "CHARTS_URL", charts.URL)), 0o644)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	chartDirs, _ := filepath.Glob(filepath.Join(dir, "charts", "*", "Chart.yaml"))
	for _, c := range chartDirs {
		tgz, err := testchart.PackageDir(filepath.Dir(c), "1.0.0", "")
		if err != nil {
			return "", err
		}
		if err := charts.Publish(tgz); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=fluxconformance", "-c", "user.email=fluxconformance@example.com", "commit", "-q", "-m", "fixture"},
	} {
		if err := git(ctx, to, args...); err != nil {
			return "", err
		}
	}
	return to, nil
}
