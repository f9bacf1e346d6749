package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// helm runs as a separate process (krusty's HelmChartInflationGenerator
// execs it) and reads charts and values files from the real disk, at paths
// below the kustomization's directory. A render with helm enabled
// therefore runs krusty on helmFS: the same files, named under a private
// temporary directory that stands for "/", where the directories of the
// charts and the values files of the kustomizations that inflate them are
// written
// (from the snapshot, through the render's guard: budgets apply and the
// reads are the render's) just before krusty reads those kustomizations.
//
// Charts from a chart repository or an OCI registry are pulled by kplan,
// not helm: through the render's chart fetcher (Options.Charts:
// internal/charts, under the network policy, with credentials, cached)
// and unpacked where `helm pull --untar` would put them, so helm itself
// reaches no network.
type helmFS struct {
	g    *guardFS // the render's file system
	disk string   // the directory standing for "/"

	mu     sync.Mutex
	copied map[string]bool // repository paths already written to disk
	pulled []string        // disk directories holding pulled charts
}

// newHelmFS returns the helm view of g and the directory krusty builds
// dir (repository-relative) from; cleanup removes what it wrote.
func newHelmFS(g *guardFS, dir string) (h *helmFS, root string, cleanup func(), err error) {
	disk, err := os.MkdirTemp("", "kplan-helm-")
	if err != nil {
		return nil, "", nil, fmt.Errorf("render %s: create a directory for helm: %w", dir, err)
	}
	h = &helmFS{g: g, disk: filepath.ToSlash(disk), copied: map[string]bool{}}
	return h, h.onDisk(snapshot.Abs(dir)), func() { os.RemoveAll(disk) }, nil
}

// repo is the path, in the render's file system, that a path krusty
// sees stands for. krusty sees every path under the private directory
// (snapshot.Root as disk/repo), so that relative paths keep their depth:
// a git base's tree on disk, named relative to the kustomization, is
// reached from disk/repo/... as from /repo/....
func (h *helmFS) repo(p string) string {
	p = filepath.ToSlash(p)
	if p == h.disk {
		return "/"
	}
	if r, ok := strings.CutPrefix(p, h.disk+"/"); ok {
		return "/" + r
	}
	return p
}

// onDisk is the path krusty sees for a path of the render's file system.
func (h *helmFS) onDisk(p string) string { return h.disk + p }

// scrub names the render's disk paths in err as the snapshot paths they
// stand for, so that messages do not depend on the temporary directory.
func (h *helmFS) scrub(err error) error {
	if err == nil || !strings.Contains(err.Error(), h.disk) {
		return err
	}
	return &renamedError{msg: strings.ReplaceAll(err.Error(), h.disk, ""), err: err}
}

type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// inPulled says whether the disk path p lies in a pulled chart, which
// only the disk holds.
func (h *helmFS) inPulled(p string) bool {
	p = filepath.ToSlash(p)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.pulled {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (h *helmFS) ReadFile(p string) ([]byte, error) {
	if h.inPulled(p) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		return data, h.g.check(h.repo(p), data)
	}
	r := h.repo(p)
	data, err := h.g.ReadFile(r)
	if err != nil || !mentionsHelm(data) {
		return data, err
	}
	if err := h.prepare(r, data); err != nil {
		return nil, h.g.fail(err)
	}
	return data, nil
}

func (h *helmFS) Open(p string) (filesys.File, error) {
	if h.inPulled(p) {
		return nil, fmt.Errorf("open %s: a pulled chart is read, not opened", h.repo(p))
	}
	return h.g.Open(h.repo(p))
}

func (h *helmFS) Exists(p string) bool {
	if h.inPulled(p) {
		_, err := os.Stat(p)
		return err == nil
	}
	return h.g.Exists(h.repo(p))
}

func (h *helmFS) IsDir(p string) bool {
	if h.inPulled(p) {
		fi, err := os.Stat(p)
		return err == nil && fi.IsDir()
	}
	return h.g.IsDir(h.repo(p))
}

func (h *helmFS) ReadDir(p string) ([]string, error) { return h.g.ReadDir(h.repo(p)) }

func (h *helmFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if h.inPulled(p) {
		if h.IsDir(p) {
			return filesys.ConfirmedDir(path.Clean(p)), "", nil
		}
		d, f := path.Split(path.Clean(p))
		return filesys.ConfirmedDir(path.Clean(d)), f, nil
	}
	d, f, err := h.g.CleanedAbs(h.repo(p))
	return filesys.ConfirmedDir(h.onDisk(string(d))), f, err
}

func (h *helmFS) Glob(pattern string) ([]string, error) {
	m, err := h.g.Glob(h.repo(pattern))
	for i := range m {
		m[i] = h.onDisk(m[i])
	}
	return m, err
}

func (h *helmFS) Walk(p string, fn filepath.WalkFunc) error {
	return h.g.Walk(h.repo(p), func(q string, info fs.FileInfo, err error) error {
		return fn(h.onDisk(q), info, err)
	})
}

func (h *helmFS) Create(p string) (filesys.File, error) { return h.g.Create(h.repo(p)) }
func (h *helmFS) Mkdir(p string) error                  { return h.g.Mkdir(h.repo(p)) }
func (h *helmFS) MkdirAll(p string) error               { return h.g.MkdirAll(h.repo(p)) }
func (h *helmFS) RemoveAll(p string) error              { return h.g.RemoveAll(h.repo(p)) }
func (h *helmFS) WriteFile(p string, data []byte) error { return h.g.WriteFile(h.repo(p), data) }

// mentionsHelm is a cheap first look before parsing a file.
func mentionsHelm(data []byte) bool {
	return bytes.Contains(data, []byte("elmChart")) || bytes.Contains(data, []byte("helmGlobals"))
}

// helmGenerator is a HelmChartInflationGenerator's config, as krusty
// reads it.
type helmGenerator struct {
	Kind string `json:"kind"`
	types.HelmGlobals
	types.HelmChart
}

// generatorCharts returns the HelmChartInflationGenerator configs in
// data: YAML documents, as a generators entry names them (a file, or the
// config inline).
func generatorCharts(data []byte) []helmGenerator {
	if !bytes.Contains(data, []byte("HelmChartInflationGenerator")) {
		return nil
	}
	docs, err := yamldocs.Mappings(data)
	if err != nil {
		return nil
	}
	var out []helmGenerator
	for _, d := range docs {
		var g helmGenerator
		if b, err := d.MarshalJSON(); err == nil && json.Unmarshal(b, &g) == nil && g.Kind == "HelmChartInflationGenerator" {
			out = append(out, g)
		}
	}
	return out
}

// prepare writes to disk what helm will read for the kustomization file
// (a snapshot path): the directories of the charts it names under its
// chart home, its additional values files, and the charts from chart
// repositories that the chart home lacks.
//
// A HelmChartInflationGenerator config (a generators entry) is prepared
// relative to its own directory, the kustomization's when inline.
func (h *helmFS) prepare(file string, data []byte) error {
	var gens []helmGenerator
	if !isKustomization(file) {
		gens = generatorCharts(data)
	} else {
		var k types.Kustomization
		if err := sigsyaml.Unmarshal(data, &k); err != nil {
			return nil // krusty reports it
		}
		k.FixKustomization()
		if len(k.HelmCharts) > 0 {
			if err := h.prepareCharts(file, k.HelmGlobals, k.HelmCharts); err != nil {
				return err
			}
		}
		for _, e := range k.Generators {
			if strings.Contains(e, "\n") {
				gens = append(gens, generatorCharts([]byte(e))...)
			}
		}
	}
	for _, g := range gens {
		if err := h.prepareCharts(file, &g.HelmGlobals, []types.HelmChart{g.HelmChart}); err != nil {
			return err
		}
	}
	return nil
}

// prepareCharts prepares charts with globals for file's directory.
func (h *helmFS) prepareCharts(file string, globals *types.HelmGlobals, charts []types.HelmChart) error {
	rel := relName(file)
	dir := path.Dir(file)
	home := types.HelmDefaultHome
	if globals != nil && globals.ChartHome != "" {
		home = globals.ChartHome
	}
	if path.IsAbs(filepath.ToSlash(home)) {
		return fmt.Errorf("%s: helmGlobals.chartHome %s is absolute: kplan renders charts from the repository only (give a path relative to the kustomization)", rel, home)
	}
	home = path.Join(dir, filepath.ToSlash(home))
	for _, c := range charts {
		for _, f := range c.AdditionalValuesFiles {
			if err := h.copyTree(rel, "additionalValuesFiles", path.Join(dir, filepath.ToSlash(f))); err != nil {
				return err
			}
		}
		// Only the chart's own directory: a chart home may be far larger
		// (the repository's top, say).
		chartHome := home
		if c.Version != "" && c.Repo != "" {
			chartHome = path.Join(home, c.Name+"-"+c.Version) // as krusty's absChartHome
		}
		if err := h.copyTree(rel, "helmGlobals.chartHome", path.Join(chartHome, c.Name)); err != nil {
			return err
		}
		if err := os.MkdirAll(h.onDisk(chartHome), 0o755); err != nil {
			return fmt.Errorf("write %s for helm: %w", relName(chartHome), err)
		}
		if c.Repo == "" {
			continue // krusty reports a chart that is not there
		}
		if fi, err := os.Stat(path.Join(h.onDisk(chartHome), c.Name)); err == nil && fi.IsDir() {
			continue // in the repository: krusty does not pull it
		}
		if err := h.pull(rel, c, h.onDisk(chartHome)); err != nil {
			return err
		}
	}
	return nil
}

// copyTree writes the repository file or directory at p (a snapshot path)
// to the render's disk, once. A path outside the repository is refused;
// a missing one is left for krusty or helm to report.
func (h *helmFS) copyTree(file, field, p string) error {
	if !h.readable(p) {
		return fmt.Errorf("%s: %s %s is outside the repository, which is all a render reads", file, field, relName(p))
	}
	h.mu.Lock()
	done := h.copied[p]
	h.copied[p] = true
	h.mu.Unlock()
	if done || !h.g.Exists(p) {
		return nil
	}
	if !h.g.IsDir(p) {
		return h.copyFile(p)
	}
	return h.g.Walk(p, func(q string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return os.MkdirAll(h.onDisk(q), 0o755)
		}
		return h.copyFile(q)
	})
}

// readable says whether p is in the repository or in a git base's tree
// the render fetched.
func (h *helmFS) readable(p string) bool {
	if p == snapshot.Root || strings.HasPrefix(p, snapshot.Root+"/") {
		return true
	}
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	for _, m := range h.g.mounts {
		if p == m || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}

func (h *helmFS) copyFile(p string) error {
	data, err := h.g.ReadFile(p)
	if err != nil {
		return err
	}
	d := h.onDisk(p)
	if err := os.MkdirAll(path.Dir(d), 0o755); err != nil {
		return fmt.Errorf("write %s for helm: %w", relName(p), err)
	}
	if err := os.WriteFile(d, data, 0o644); err != nil {
		return fmt.Errorf("write %s for helm: %w", relName(p), err)
	}
	return nil
}

// pull fetches chart c from its repository into the disk directory into,
// as `helm pull --untar --untardir into` does for kustomize, with --repo R
// --version V for a chart repository, or oci://R/NAME --version V for an
// OCI registry (kustomize v0.21.2
// api/internal/builtins/HelmChartInflationGenerator.go pullCommand) — but
// through kplan's chart fetcher (internal/charts: the network policy,
// credentials, the chart cache), so helm itself reaches no network. The
// archive and what it unpacks count against the render's read budget.
func (h *helmFS) pull(file string, c types.HelmChart, into string) error {
	what := fmt.Sprintf("%s: helmCharts %s from %s", file, c.Name, c.Repo)
	if h.g.charts == nil {
		return fmt.Errorf("%s: fetch refused: this render fetches from no host (hosts are listed with kplan's --remote-hosts, the Action's remote-hosts input or a webhook target's remoteHosts)", what)
	}
	got, err := h.g.charts.Pull(h.g.ctx, charts.Ref{Repo: c.Repo, Name: c.Name, Version: c.Version, Devel: c.Devel})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.g.take(c.Repo+" "+c.Name+" "+got.Version, int64(len(got.Archive))); err != nil {
		return h.g.fail(err)
	}
	if err := h.untar(got.Archive, into); err != nil {
		return fmt.Errorf("%s: unpack %s %s: %w", what, c.Name, got.Version, err)
	}
	return nil
}

// untar writes a chart archive's files (charts.Files, the one untar)
// into dir/<the chart's name>, as `helm pull --untar` does; what it
// writes counts against the render's read budget.
func (h *helmFS) untar(tgz []byte, dir string) error {
	files, err := charts.Files(tgz)
	if err != nil {
		return err
	}
	name, err := charts.Name(files)
	if err != nil {
		return err
	}
	top := path.Join(dir, name)
	for _, f := range files {
		if err := h.g.take(f.Name, int64(len(f.Data))); err != nil {
			return h.g.fail(err)
		}
		d := path.Join(top, f.Name)
		if err := os.MkdirAll(path.Dir(d), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(d, f.Data, 0o644); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.pulled = append(h.pulled, top)
	slices.Sort(h.pulled)
	h.mu.Unlock()
	return nil
}
