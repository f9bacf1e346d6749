package flux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/helm"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// HelmReleases are rendered as helm-controller renders them
// (internal/helm), once every target of a side is built: the
// sources and values they read may come from any Flux Kustomization of
// the cluster. Their objects join their target's, each with its own
// identity, so the plan diffs them as any other object.
//
// A release kplan cannot render offline or under the network policy
// (its chart cannot be fetched, its source is not this repository, a
// values source is not in it) is listed in NotRendered with the reason,
// and its objects are left out on both sides of a plan, so that no side
// shows objects the other cannot: the HelmRelease object itself is still
// planned. A release that fails to render for any other reason (the
// chart does not load or template, a values file is not YAML) fails its
// target on that side, as Flux would fail it: a reviewer never sees "no
// change" for a release that did not render.

// sourceGroup is the API group of Flux's sources.
const sourceGroup = "source.toolkit.fluxcd.io"

// releaseRender is one HelmRelease of a target, rendered.
type releaseRender struct {
	id      string // namespace/name of the HelmRelease
	objects []*yaml.RNode
	err     error // *helm.UnavailableError or a render failure
}

// renderReleases renders the HelmReleases of res's built targets and
// adds their objects to them. base, when not nil, is the plan's other
// side (its releases exist already: the upgrade's CRD policy applies),
// whose releases are reconciled with these: see above.
func (e *Engine) renderReleases(ctx context.Context, s *snapshot.Snapshot, res *Result, upgraded func(cluster, release string) bool) map[string][]releaseRender {
	// Each cluster's releases find their sources and values among what
	// that cluster applies.
	envs := map[string]helm.Env{}
	out := map[string][]releaseRender{}
	for _, t := range res.Targets {
		if t.Err != nil || t.Deferred {
			continue
		}
		env, ok := envs[t.Cluster]
		if !ok {
			env = e.helmEnv(ctx, s, res, t.Cluster)
			envs[t.Cluster] = env
		}
		for _, o := range t.Objects {
			if !helm.Is(o.GetApiVersion(), o.GetKind()) {
				continue
			}
			rr := releaseRender{id: o.GetNamespace() + "/" + o.GetName()}
			rr.err = crash.Catch(func() error {
				var err error
				rr.objects, err = e.renderRelease(ctx, o, env, upgraded != nil && upgraded(t.Cluster, rr.id))
				return err
			})
			if c := crash.As(rr.err); c != nil {
				slog.Error("kplan bug: panic rendering a HelmRelease; it fails, the rest is planned", "target", t.ID(), "release", rr.id, "panic", fmt.Sprint(c.Value), "stack", string(c.Stack))
				rr.err = fmt.Errorf("HelmRelease %s: %w", rr.id, rr.err)
			}
			out[t.Name()] = append(out[t.Name()], rr)
		}
	}
	return out
}

// applyReleases adds rendered releases to their targets; drop names
// releases (target ID, release ID) whose objects are left out.
func applyReleases(res *Result, rendered map[string][]releaseRender, drop func(target, release string) (string, bool), kube func(cluster string) kubeversion.Capabilities) {
	for _, t := range res.Targets {
		if len(rendered[t.Name()]) > 0 && kube != nil {
			caps := kube(t.Cluster)
			t.Kubernetes = &caps
		}
		var failed []string
		for _, rr := range rendered[t.Name()] {
			var un *helm.UnavailableError
			switch {
			case errors.As(rr.err, &un):
				t.NotRendered = append(t.NotRendered, fmt.Sprintf("HelmRelease %s is not rendered: %s", rr.id, strings.TrimPrefix(un.Error(), "HelmRelease "+rr.id+": ")))
			case rr.err != nil:
				failed = append(failed, rr.err.Error())
			default:
				if why, ok := drop(t.Name(), rr.id); ok {
					t.NotRendered = append(t.NotRendered, fmt.Sprintf("HelmRelease %s is not rendered: on the other side of the plan %s", rr.id, why))
					continue
				}
				t.Objects = append(t.Objects, rr.objects...)
			}
		}
		if len(failed) > 0 {
			t.Err, t.Objects = fmt.Errorf("Flux Kustomization %s: %s", t.ID(), strings.Join(failed, "; ")), nil
		}
	}
}

// renderBuilt renders and applies the releases of one side alone.
func (e *Engine) renderBuilt(ctx context.Context, s *snapshot.Snapshot, res *Result) {
	r := e.renderReleases(ctx, s, res, nil)
	applyReleases(res, r, func(string, string) (string, bool) { return "", false }, e.kubeOf(res))
}

// renderPlan renders and applies the releases of both sides of a plan.
func (e *Engine) renderPlan(ctx context.Context, snaps [2]*snapshot.Snapshot, res [2]*Result) {
	var r [2]map[string][]releaseRender
	r[0] = e.renderReleases(ctx, snaps[0], res[0], func(string, string) bool { return true })
	onBase := map[string]bool{}
	for _, t := range res[0].Targets {
		for _, o := range t.Objects {
			if helm.Is(o.GetApiVersion(), o.GetKind()) {
				onBase[t.Cluster+"\x00"+o.GetNamespace()+"/"+o.GetName()] = true
			}
		}
	}
	r[1] = e.renderReleases(ctx, snaps[1], res[1], func(cluster, rel string) bool { return onBase[cluster+"\x00"+rel] })
	for i := range res {
		other := r[1-i]
		applyReleases(res[i], r[i], func(target, rel string) (string, bool) {
			for _, rr := range other[target] {
				var un *helm.UnavailableError
				if rr.id == rel && errors.As(rr.err, &un) {
					return "it cannot be (" + strings.TrimPrefix(un.Error(), "HelmRelease "+rel+": ") + ")", true
				}
			}
			return "", false
		}, e.kubeOf(res[i]))
	}
	// A change of what a cluster runs re-renders its charts: the plan
	// says so where it does.
	for _, t := range res[1].Targets {
		if o := res[0].Target(t.Name()); o != nil && o.Kubernetes != nil && t.Kubernetes != nil && !sameCapabilities(*o.Kubernetes, *t.Kubernetes) {
			t.Notes = append(t.Notes, fmt.Sprintf("its charts are rendered for %s on head, %s on base: what the cluster runs changed", t.Kubernetes, o.Kubernetes))
		}
	}
}

// kubeOf is what each cluster runs on res's side.
func (e *Engine) kubeOf(res *Result) func(cluster string) kubeversion.Capabilities {
	if res != nil && res.kube != nil {
		return res.kube
	}
	return e.kubernetes
}

// sameCapabilities says whether charts render alike for a and b: the
// same version and API versions, wherever declared.
func sameCapabilities(a, b kubeversion.Capabilities) bool {
	return a.Version == b.Version && slices.Equal(a.APIVersions, b.APIVersions)
}

// renderRelease renders one HelmRelease object, what its Secrets' values
// make masked as postBuild masks what Secret variables make: the twin
// render, with a token for each such value, says which fields they made.
func (e *Engine) renderRelease(ctx context.Context, o *yaml.RNode, env helm.Env, upgrade bool) ([]*yaml.RNode, error) {
	m, err := asMap(o)
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	rel, err := helm.Parse(m)
	if err != nil {
		return nil, err
	}
	if rel.Spec.Suspend {
		return nil, &helm.UnavailableError{Release: rel.ID(), Reason: "suspended: helm-controller installs nothing of it"}
	}
	env.Upgrade = upgrade
	p, err := helm.Prepare(ctx, rel, env)
	if err != nil {
		return nil, err
	}
	real, err := p.Render(ctx, nil)
	if len(p.Secrets) == 0 {
		return real, err
	}
	secrets := map[string]string{}
	vars := map[string]string{}
	for _, n := range p.Secrets {
		secrets[n] = ""
	}
	for _, ref := range rel.Spec.ValuesFrom {
		if vs, ok := env.Values(ref.Kind, rel.Namespace, ref.Name); ok && vs.Secret {
			for k, v := range vs.Data {
				vars[ref.Name+"/"+k] = v
			}
		}
	}
	tokens := newSecretTokens([]*yaml.RNode{o}, vars, secrets, func(name string) string { return name })
	twin, terr := p.Render(ctx, func(name string, _ any) any { return tokens.token[name] })
	switch {
	case err != nil && terr != nil:
		s, _ := tokens.hide(terr.Error())
		return nil, errors.New(s)
	case err != nil:
		return nil, fmt.Errorf("HelmRelease %s: chart %s: the render fails with the values its Secrets give (the error is not shown: it may quote them)", rel.ID(), p.Chart)
	case terr != nil:
		s, _ := tokens.hide(terr.Error())
		return nil, fmt.Errorf("HelmRelease %s: kplan cannot tell which fields the values of its Secrets make: without them the render fails (%s)", rel.ID(), s)
	}
	if len(real) != len(twin) {
		return nil, fmt.Errorf("HelmRelease %s: kplan cannot tell which objects the values of its Secrets make (the chart renders other objects without them)", rel.ID())
	}
	for i := range real {
		if real[i].GetKind() != twin[i].GetKind() || real[i].GetName() != twin[i].GetName() {
			return nil, fmt.Errorf("HelmRelease %s: kplan cannot tell which objects the values of its Secrets make (the chart renders other objects without them)", rel.ID())
		}
	}
	return tokens.maskSecretFields(real, twin), nil
}

// helmEnv is what the releases of res read: the sources and values the
// side's targets apply (sources the repository declares when no built
// target applies them: a target the plan left unbuilt), this repository's
// files for its GitRepositories, the engine's charts.
func (e *Engine) helmEnv(ctx context.Context, s *snapshot.Snapshot, res *Result, cluster string) helm.Env {
	sources := map[string]map[string]any{} // kind/ns/name
	for _, t := range res.Targets {
		if t.Cluster != cluster {
			continue
		}
		for _, o := range t.Objects {
			if g, _, _ := strings.Cut(o.GetApiVersion(), "/"); g == sourceGroup {
				if m, err := asMap(o); err == nil {
					sources[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = m
				}
			}
		}
	}
	pool := res.pools[cluster]
	declared := sync.OnceValue(func() map[string][]map[string]any { return declaredSources(ctx, s) })
	// A chart of a GitRepository of this repository is read from its
	// artifact (source.go), as the cluster's targets built from it are.
	artifacts := map[string]*snapshot.Snapshot{}
	for _, t := range res.Targets {
		if kind, id := t.Source(); t.Cluster == cluster && kind == "GitRepository" && t.src != nil && t.src.err == nil {
			artifacts[id] = t.src.snap
		}
	}
	return helm.Env{
		Source: func(kind, ns, name string) map[string]any {
			if m := sources[kind+"/"+ns+"/"+name]; m != nil {
				return m
			}
			var match map[string]any
			for _, m := range declared()[kind+"/"+name] {
				got, _, _ := unstructured.NestedString(m, "metadata", "namespace")
				if got == ns {
					return m
				}
				if got == "" {
					match = m
				}
			}
			return match
		},
		Values: func(kind, ns, name string) (*helm.ValuesSource, bool) {
			vs, ok := pool[poolKey(kind, ns, name)]
			if !ok {
				return nil, false
			}
			return &helm.ValuesSource{Data: vs.values, Secret: vs.secret, Unknown: vs.unknown}, true
		},
		Local: func(ctx context.Context, kind, ns, name, dir string) (map[string][]byte, bool, error) {
			if kind != "GitRepository" || !slices.Contains(e.opts.Sources, ns+"/"+name) {
				return nil, false, nil
			}
			from := s
			if a := artifacts[ns+"/"+name]; a != nil {
				from = a
			}
			files, err := readDir(ctx, from, dir)
			return files, true, err
		},
		Charts:     e.charts,
		Kustomizer: e.k,
		Timeout:    e.opts.Render.Timeout,
		Kubernetes: e.kubeOf(res)(cluster),
	}
}

// kubernetes is what cluster runs, for its releases' charts.
func (e *Engine) kubernetes(cluster string) kubeversion.Capabilities {
	if e.opts.Kubernetes == nil {
		return kubeversion.Defaults()
	}
	return e.opts.Kubernetes(cluster)
}

// readDir reads the files under dir of s, by path relative to dir.
func readDir(ctx context.Context, s *snapshot.Snapshot, dir string) (map[string][]byte, error) {
	paths := under(s, dir)
	contents, err := s.ReadFiles(ctx, paths)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(contents))
	for p, data := range contents {
		if data == nil {
			return nil, fmt.Errorf("%s is too large to read", p)
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if dir == "." {
			rel = p
		}
		out[rel] = data
	}
	return out, nil
}

// under lists the files of s below dir.
func under(s *snapshot.Snapshot, dir string) []string {
	all := s.Index.Paths()
	if dir == "." {
		return all
	}
	i, _ := slices.BinarySearch(all, dir+"/")
	var out []string
	for ; i < len(all) && strings.HasPrefix(all[i], dir+"/"); i++ {
		out = append(out, all[i])
	}
	return out
}

// declaredSources are the Flux sources the repository's YAML files
// declare, by kind/name.
func declaredSources(ctx context.Context, s *snapshot.Snapshot) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	var yamls []string
	for _, p := range s.Index.Paths() {
		if snapshot.IsYAML(p) {
			yamls = append(yamls, p)
		}
	}
	files, err := s.Containing(ctx, yamls, sourceGroup)
	if err != nil {
		return out
	}
	contents, err := s.ReadFiles(ctx, files)
	if err != nil {
		return out
	}
	for _, p := range slices.Sorted(maps.Keys(contents)) {
		for _, m := range yamlMaps(contents[p]) {
			api, _, _ := unstructured.NestedString(m, "apiVersion")
			kind, _, _ := unstructured.NestedString(m, "kind")
			name, _, _ := unstructured.NestedString(m, "metadata", "name")
			if g, _, _ := strings.Cut(api, "/"); g == sourceGroup && name != "" {
				out[kind+"/"+name] = append(out[kind+"/"+name], m)
			}
		}
	}
	return out
}

// yamlMaps are the mapping documents of a YAML file; none if it does
// not parse.
func yamlMaps(data []byte) []map[string]any {
	nodes, err := yamldocs.Mappings(data)
	if err != nil {
		return nil
	}
	var out []map[string]any
	for _, n := range nodes {
		if m, err := asMap(n); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// chartPaths are the repository paths of the charts that the
// HelmReleases among files (repository paths a target's build reads)
// take from this repository: a chart edit must plan the target.
func (e *Engine) chartPaths(ctx context.Context, s *snapshot.Snapshot, files []string) []string {
	byFile := e.repoChartsOf(ctx, s)
	if len(byFile) == 0 {
		return nil
	}
	set := map[string]bool{}
	for _, f := range files {
		for _, p := range byFile[f] {
			set[p] = true
		}
	}
	return sorted(set)
}

// repoChartsOf is, for each file of s declaring HelmReleases whose chart
// is in this repository, the paths of those charts and values files:
// one search of the tree per snapshot, not one per target. The
// HelmRelease's namespace is not known before its build, so a
// GitRepository of this repository is matched by name.
func (e *Engine) repoChartsOf(ctx context.Context, s *snapshot.Snapshot) map[string][]string {
	once, _ := e.repoCharts.LoadOrStore(s, sync.OnceValue(func() map[string][]string {
		var yamls []string
		for _, p := range s.Index.Paths() {
			if snapshot.IsYAML(p) {
				yamls = append(yamls, p)
			}
		}
		// Most releases take remote charts: their files need no parse.
		with, err := s.Containing(ctx, yamls, "HelmRelease")
		if err == nil && len(with) > 0 {
			with, err = s.Containing(ctx, with, "GitRepository")
		}
		if err != nil || len(with) == 0 {
			return nil
		}
		contents, err := s.ReadFiles(ctx, with)
		if err != nil {
			return nil
		}
		names := map[string]bool{}
		for _, src := range e.opts.Sources {
			_, n, _ := strings.Cut(src, "/")
			names[n] = true
		}
		out := map[string][]string{}
		for file, data := range contents {
			for _, m := range yamlMaps(data) {
				api, _, _ := unstructured.NestedString(m, "apiVersion")
				kind, _, _ := unstructured.NestedString(m, "kind")
				if !helm.Is(api, kind) {
					continue
				}
				ref, _, _ := unstructured.NestedStringMap(m, "spec", "chart", "spec", "sourceRef")
				chart, _, _ := unstructured.NestedString(m, "spec", "chart", "spec", "chart")
				if ref["kind"] != "GitRepository" || !names[ref["name"]] || chart == "" {
					continue
				}
				dir := strings.TrimPrefix(path.Clean("/"+chart), "/")
				if dir == "" {
					dir = "."
				}
				out[file] = append(out[file], under(s, dir)...)
				vf, _, _ := unstructured.NestedStringSlice(m, "spec", "chart", "spec", "valuesFiles")
				for _, f := range vf {
					out[file] = append(out[file], strings.TrimPrefix(path.Clean("/"+f), "/"))
				}
			}
		}
		return out
	}))
	return once.(func() map[string][]string)()
}

// valuesFromNames are the names of the ConfigMaps and Secrets the
// repository's HelmReleases take values from: a target that may output
// one is built, as one that may output a substitution source is.
func valuesFromNames(ctx context.Context, s *snapshot.Snapshot) []string {
	var yamls []string
	for _, p := range s.Index.Paths() {
		if snapshot.IsYAML(p) {
			yamls = append(yamls, p)
		}
	}
	files, err := s.Containing(ctx, yamls, "valuesFrom")
	if err != nil {
		return nil
	}
	contents, err := s.ReadFiles(ctx, files)
	if err != nil {
		return nil
	}
	set := map[string]bool{}
	for _, data := range contents {
		for _, m := range yamlMaps(data) {
			raw, _, _ := unstructured.NestedSlice(m, "spec", "valuesFrom")
			for _, r := range raw {
				if rm, ok := r.(map[string]any); ok {
					if n, _ := rm["name"].(string); n != "" {
						set[n] = true
					}
				}
			}
		}
	}
	return sorted(set)
}
