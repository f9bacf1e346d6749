package helm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/charts"
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/kubeversion"
	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/snapshot"
	"github.com/kplan-dev/kplan/internal/yamldocs"
)

// Env is what a render reads besides the HelmRelease.
type Env struct {
	// Source returns the source object (HelmRepository, OCIRepository,
	// GitRepository, Bucket, HelmChart) kind namespace/name that the
	// cluster's Flux Kustomizations apply, nil when none does.
	Source func(kind, namespace, name string) map[string]any
	// Values returns the ConfigMap or Secret kind namespace/name the
	// cluster's Flux Kustomizations apply.
	Values func(kind, namespace, name string) (*ValuesSource, bool)
	// Local reads the directory dir (repository-relative) of the source
	// kind namespace/name when that source is this repository: its
	// files by path relative to dir. ok is false when it is not.
	Local func(ctx context.Context, kind, namespace, name, dir string) (files map[string][]byte, ok bool, err error)
	// Charts fetches and caches remote charts; nil fetches none.
	Charts *charts.Fetcher
	// Upgrade says the release exists already (on the plan's base): the
	// upgrade's CRD policy and hooks apply, not the install's.
	Upgrade bool
	// Kustomizer runs the kustomize post-renderers; nil makes one.
	Kustomizer *render.Kustomizer
	// Timeout bounds one templating: 0 is render.DefaultTimeout, < 0
	// none. Helm's engine takes no context: past it the render fails and
	// is abandoned, as a kustomize build is (render.Kustomizer).
	Timeout time.Duration
	// Kubernetes is what the release's cluster runs, as its Capabilities
	// say; the zero value is kubeversion's default.
	Kubernetes kubeversion.Capabilities
}

// Prepared is a release whose chart is fetched and whose values sources
// are read, ready to render.
type Prepared struct {
	Release *Release
	// Chart names the chart and where it comes from, for messages.
	Chart string
	// Secrets name the values Secrets gave ("Secret ns/name key:path"):
	// a render with Tokenize replaces each.
	Secrets []string

	env     Env
	archive []byte            // a packaged chart, or
	files   map[string][]byte // the chart's files from the repository
	deps    map[string][]byte // local dependencies' archives by name
	valuesF *valuesFiles      // spec.chart.spec.valuesFiles; nil: the chart's own values
}

// Prepare fetches r's chart and reads its values sources.
func Prepare(ctx context.Context, r *Release, env Env) (*Prepared, error) {
	p := &Prepared{Release: r, env: env}
	if err := p.fetch(ctx); err != nil {
		return nil, err
	}
	_, secrets, err := r.values(env.Values, nil)
	if err != nil {
		return nil, err
	}
	p.Secrets = secrets
	return p, nil
}

func (p *Prepared) unavailable(reason string, err error) error {
	e := &UnavailableError{Release: p.Release.ID(), Chart: p.Chart, Reason: reason, Err: err}
	// A refused fetch says itself which setting allows the host.
	var refused *netpolicy.RefusedError
	if err != nil && !errors.As(err, &refused) {
		e.Hint = "a chart is fetched only from the hosts listed with kplan's --remote-hosts, the Action's remote-hosts input or a webhook target's remoteHosts"
	}
	return e
}

// fetch gets the chart the release names.
func (p *Prepared) fetch(ctx context.Context) error {
	r := p.Release
	var spec ChartSpec
	specNS := r.Namespace
	switch {
	case r.Spec.ChartRef != nil:
		ref := *r.Spec.ChartRef
		ns := ref.Namespace
		if ns == "" {
			ns = r.Namespace
		}
		obj := p.source(ref.Kind, ns, ref.Name)
		if obj == nil {
			p.Chart = fmt.Sprintf("from %s %s/%s", ref.Kind, ns, ref.Name)
			return p.unavailable(fmt.Sprintf("spec.chartRef: no Flux Kustomization of this cluster applies %s %s/%s", ref.Kind, ns, ref.Name), nil)
		}
		src := source{kind: ref.Kind, ns: ns, name: ref.Name, obj: obj}
		switch ref.Kind {
		case "OCIRepository":
			return p.fromOCIRepository(ctx, src)
		case "HelmChart":
			raw, _ := obj["spec"].(map[string]any)
			b, _ := json.Marshal(raw)
			if err := json.Unmarshal(b, &spec); err != nil {
				return fmt.Errorf("HelmRelease %s: HelmChart %s/%s: read its spec: %w", r.ID(), ns, ref.Name, err)
			}
			specNS = ns
		default:
			return fmt.Errorf("HelmRelease %s: spec.chartRef kind %s is not OCIRepository or HelmChart", r.ID(), ref.Kind)
		}
	default:
		spec = r.Spec.Chart.Spec
	}
	ref := spec.SourceRef
	ns := ref.Namespace
	if ns == "" {
		ns = specNS
	}
	src := source{kind: ref.Kind, ns: ns, name: ref.Name}
	switch ref.Kind {
	case "HelmRepository":
		src.obj = p.source(ref.Kind, ns, ref.Name)
		p.Chart = fmt.Sprintf("%s %s from %s", spec.Chart, cmpOr(spec.Version, "*"), src.id())
		if src.obj == nil {
			return p.unavailable(fmt.Sprintf("no Flux Kustomization of this cluster applies %s", src.id()), nil)
		}
		u := src.str("spec", "url")
		p.Chart = fmt.Sprintf("%s %s from %s", spec.Chart, cmpOr(spec.Version, "*"), u)
		got, err := p.pull(ctx, src, charts.Ref{Repo: u, Name: spec.Chart, Version: spec.Version, Insecure: src.bool("spec", "insecure")})
		if err != nil {
			return err
		}
		p.Chart = fmt.Sprintf("%s %s from %s", spec.Chart, got.Version, u)
		p.valuesF = newValuesFiles(spec)
		return nil
	case "GitRepository", "Bucket":
		dir := cleanChartPath(spec.Chart)
		p.Chart = fmt.Sprintf("%s from %s", dir, src.id())
		if p.env.Local == nil {
			return p.unavailable(fmt.Sprintf("%s is not this repository", src.id()), nil)
		}
		files, ok, err := p.env.Local(ctx, ref.Kind, ns, ref.Name, dir)
		if err != nil {
			return fmt.Errorf("HelmRelease %s: chart %s: %w", r.ID(), p.Chart, err)
		}
		if !ok {
			return p.unavailable(fmt.Sprintf("%s is not this repository (kplan reads charts from this repository, HelmRepositories and OCI registries)", src.id()), nil)
		}
		if len(files) == 0 {
			return fmt.Errorf("HelmRelease %s: chart %s: the directory holds no file", r.ID(), p.Chart)
		}
		p.files = files
		if p.valuesF = newValuesFiles(spec); p.valuesF != nil {
			if err := p.valuesF.readLocal(ctx, p.env.Local, src, dir, files); err != nil {
				return fmt.Errorf("HelmRelease %s: chart %s: %w", r.ID(), p.Chart, err)
			}
		}
		return p.localDeps(ctx, src, dir)
	}
	return fmt.Errorf("HelmRelease %s: spec.chart.spec.sourceRef kind %q is not HelmRepository, GitRepository or Bucket", r.ID(), ref.Kind)
}

// localDeps reads the file:// dependencies of a chart in the repository
// that its charts/ directory does not vendor, as source-controller
// builds them from the same source.
func (p *Prepared) localDeps(ctx context.Context, src source, dir string) error {
	err := BuildDependencies(ctx, p.files, DependencySource{Local: func(ctx context.Context, rel string) (map[string][]byte, bool, error) {
		return p.env.Local(ctx, src.kind, src.ns, src.name, cleanChartPath(path.Join(dir, rel)))
	}})
	if errors.Is(err, ErrRemoteDependency) {
		return p.unavailable(strings.TrimPrefix(err.Error(), ErrRemoteDependency.Error()+": ")+" (kplan builds the dependencies of a repository chart from the repository only)", nil)
	}
	if err != nil {
		return fmt.Errorf("HelmRelease %s: chart %s: %w", p.Release.ID(), p.Chart, err)
	}
	return nil
}

func (p *Prepared) source(kind, ns, name string) map[string]any {
	if p.env.Source == nil {
		return nil
	}
	return p.env.Source(kind, ns, name)
}

// fromOCIRepository fetches the chart an OCIRepository names.
func (p *Prepared) fromOCIRepository(ctx context.Context, src source) error {
	u := src.str("spec", "url")
	ref := charts.Ref{Repo: u, Version: src.str("spec", "ref", "semver"), Tag: src.str("spec", "ref", "tag"),
		Digest: src.str("spec", "ref", "digest"), Insecure: src.bool("spec", "insecure")}
	if ref.Version == "" && ref.Tag == "" {
		ref.Tag = "latest" // source-controller's default
	}
	p.Chart = fmt.Sprintf("%s:%s", u, cmpOr(ref.Digest, cmpOr(ref.Version, ref.Tag)))
	if !strings.HasPrefix(u, "oci://") {
		return fmt.Errorf("HelmRelease %s: %s: spec.url %q is not oci://", p.Release.ID(), src.id(), u)
	}
	got, err := p.pull(ctx, src, ref)
	if err != nil {
		return err
	}
	p.Chart = fmt.Sprintf("%s:%s", u, got.Version)
	return nil
}

// pull fetches the chart ref of source src into p. A chart that cannot
// be fetched makes the release unavailable; one whose source has a
// secretRef says how kplan gets the credentials that Secret holds for
// Flux.
func (p *Prepared) pull(ctx context.Context, src source, ref charts.Ref) (*charts.Chart, error) {
	got, err := p.env.Charts.Pull(ctx, ref)
	if err != nil {
		e := p.unavailable("cannot be fetched", err)
		var auth *charts.AuthError
		if s := src.str("spec", "secretRef", "name"); s != "" && errors.As(err, &auth) {
			e.(*UnavailableError).Hint = fmt.Sprintf("%s takes credentials from Secret %s/%s, which kplan does not read: give kplan the same ones where it runs, as docs/charts.md#credentials says", src.id(), src.ns, s)
		}
		return nil, e
	}
	p.archive = got.Archive
	return got, nil
}

// load reads the chart anew: a render changes the chart it is given
// (disabled dependencies are dropped).
func (p *Prepared) load() (*chart.Chart, error) {
	var ch *chart.Chart
	var err error
	if p.archive != nil {
		var files []*charts.File
		if files, err = charts.Files(p.archive); err == nil {
			ch, err = loader.LoadFiles(files)
		}
	} else {
		var bf []*loader.BufferedFile
		for _, name := range slices.Sorted(maps.Keys(p.files)) {
			bf = append(bf, &loader.BufferedFile{Name: name, Data: p.files[name]})
		}
		ch, err = loader.LoadFiles(bf)
	}
	if err != nil {
		return nil, fmt.Errorf("load the chart: %w", err)
	}
	if p.valuesF != nil {
		if err := p.valuesF.compose(ch); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// Render templates the release with its values, tokenize standing in for
// every value a Secret gave (nil: the real values), and returns the
// objects helm-controller applies: the chart's manifests (its CRDs by
// the CRD policy) after the post-renderers and origin labels, then its
// hooks except tests (helm-controller runs them; tests only on
// request), each in the release namespace unless it sets one or is
// cluster-scoped.
func (p *Prepared) Render(ctx context.Context, tokenize Tokenize) ([]*yaml.RNode, error) {
	r := p.Release
	vals, _, err := r.values(p.env.Values, tokenize)
	if err != nil {
		return nil, err
	}
	ch, err := p.load()
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s: chart %s: %w", r.ID(), p.Chart, err)
	}
	t := templating{
		name:        r.ReleaseName(),
		namespace:   r.ReleaseNamespace(),
		includeCRDs: r.IncludeCRDs(p.env.Upgrade),
		hooks:       !r.DisableHooks(p.env.Upgrade),
		kubeVersion: p.env.Kubernetes.Version,
		apiVersions: p.env.Kubernetes.APIVersionSet(),
	}
	rel, err := p.template(ctx, t, ch, vals)
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s: chart %s: %w", r.ID(), p.Chart, err)
	}
	objs, err := p.postRender(ctx, rel.manifest)
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s: chart %s: post-render: %w", r.ID(), p.Chart, err)
	}
	if t.hooks {
		for _, h := range rel.hooks {
			if isTest(h) {
				continue
			}
			hs, err := parse(h.Manifest)
			if err != nil {
				return nil, fmt.Errorf("HelmRelease %s: chart %s: hook %s: %w", r.ID(), p.Chart, h.Path, err)
			}
			objs = append(objs, hs...)
		}
	}
	if err := setNamespaces(objs, t.namespace); err != nil {
		return nil, fmt.Errorf("HelmRelease %s: chart %s: %w", r.ID(), p.Chart, err)
	}
	return objs, nil
}

// templating is what a client-only install templates with: helm-controller
// renders a release as `helm install --dry-run` would before applying it.
type templating struct {
	name, namespace    string
	includeCRDs, hooks bool
	// kubeVersion ("": kubeversion.Default, never Helm's v1.20) and
	// apiVersions (added to Helm's) are the Capabilities, as install.go's
	// ClientOnly sets them from --kube-version and --api-versions.
	kubeVersion string
	apiVersions []string
	// skipSchemaValidation leaves values.schema.json unchecked.
	skipSchemaValidation bool
}

// rendered is a templated chart: its manifests (CRDs first, when
// included) as one YAML stream, and its hooks.
type rendered struct {
	manifest string
	hooks    []*release.Hook
}

// template renders the chart within the render's time bound.
func (p *Prepared) template(ctx context.Context, t templating, ch *chart.Chart, vals map[string]any) (*rendered, error) {
	return t.within(ctx, p.env.Timeout, ch, vals)
}

// TemplateOptions are what Template runs `helm template` with.
type TemplateOptions struct {
	Name, Namespace string
	IncludeCRDs     bool
	// Hooks adds the chart's hooks, except tests, after its manifests.
	Hooks bool
	// Timeout bounds the templating as Env.Timeout does.
	Timeout time.Duration
	// KubeVersion and APIVersions are `helm template --kube-version` and
	// `--api-versions`: the Capabilities the chart sees besides Helm's
	// own API versions ("": kubeversion.Default, never Helm's v1.20; a
	// cluster's are kubeversion.Capabilities' Version and APIVersionSet).
	KubeVersion string
	APIVersions []string
	// SkipSchemaValidation is --skip-schema-validation: the values are
	// not checked against the chart's values.schema.json.
	SkipSchemaValidation bool
}

// Template renders ch with vals as `helm template --skip-tests` does
// (Helm's client-only install) and returns its objects: the manifests,
// CRDs first when included, then the hooks when asked. Argo CD's repo
// server renders a Helm source this way; HelmReleases render through
// Prepared.Render, which adds helm-controller's steps.
func Template(ctx context.Context, ch *chart.Chart, vals map[string]any, o TemplateOptions) ([]*yaml.RNode, error) {
	t := templating{name: o.Name, namespace: o.Namespace, includeCRDs: o.IncludeCRDs, hooks: o.Hooks, kubeVersion: o.KubeVersion, apiVersions: o.APIVersions, skipSchemaValidation: o.SkipSchemaValidation}
	rel, err := t.within(ctx, o.Timeout, ch, vals)
	if err != nil {
		return nil, err
	}
	objs, err := parse(rel.manifest)
	if err != nil {
		return nil, err
	}
	if t.hooks {
		for _, h := range rel.hooks {
			if isTest(h) {
				continue
			}
			hs, err := parse(h.Manifest)
			if err != nil {
				return nil, fmt.Errorf("hook %s: %w", h.Path, err)
			}
			objs = append(objs, hs...)
		}
	}
	return objs, nil
}

// within runs the templating within timeout (0: render.DefaultTimeout,
// < 0: none).
func (t templating) within(ctx context.Context, timeout time.Duration, ch *chart.Chart, vals map[string]any) (*rendered, error) {
	if timeout == 0 {
		timeout = render.DefaultTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	type result struct {
		rel *rendered
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned render never blocks
	go func() {
		var r result
		r.err = crash.Catch(func() (err error) {
			r.rel, err = t.run(ch, vals)
			return err
		})
		done <- r
	}()
	select {
	case r := <-done:
		return r.rel, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("templating took more than %s, and was abandoned", timeout)
		}
		return nil, ctx.Err()
	}
}

// run is the Helm SDK's client-only install (action.Install with
// DryRun and ClientOnly, as `helm template` runs it) up to its rendered
// manifest, written against pkg/engine directly: action links Helm's
// cluster client (pkg/kube and kubectl's command packages), which a plan
// never uses. The steps and their order are install.go's RunWithContext
// and action.go's renderResources in helm v3.22: the release name
// checked, dependencies enabled and their values merged, the default
// capabilities (the cluster's Kubernetes, kubeversion's default: not
// Helm's v1.20), the chart's kubeVersion range, values validated against
// the schema, NOTES.txt dropped, manifests sorted in install order and
// hooks split off.
func (t templating) run(ch *chart.Chart, vals map[string]any) (*rendered, error) {
	if err := chartutil.ValidateReleaseName(t.name); err != nil {
		return nil, fmt.Errorf("release name %q: %w", t.name, err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(cmpOr(t.kubeVersion, kubeversion.Default))
	if err != nil {
		return nil, fmt.Errorf("kube version %q: %w", t.kubeVersion, err)
	}
	caps.KubeVersion = *kv
	// A new slice: Copy shares Helm's default set, whose spare capacity
	// another templating's append would write into.
	caps.APIVersions = slices.Concat(caps.APIVersions, t.apiVersions)
	if v := ch.Metadata.KubeVersion; v != "" && !chartutil.IsCompatibleRange(v, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", v, caps.KubeVersion.String())
	}
	opts := chartutil.ReleaseOptions{Name: t.name, Namespace: t.namespace, Revision: 1, IsInstall: true}
	values, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, t.skipSchemaValidation)
	if err != nil {
		return nil, err
	}
	files, err := (&engine.Engine{}).Render(ch, values)
	if err != nil {
		return nil, err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if t.includeCRDs {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return &rendered{manifest: b.String(), hooks: hooks}, nil
}

func isTest(h *release.Hook) bool {
	for _, e := range h.Events {
		if e == release.HookTest {
			return true
		}
	}
	return false
}

// parse reads a manifest stream as Helm's client does (Lists flattened);
// empty documents are dropped.
func parse(manifest string) ([]*yaml.RNode, error) {
	nodes, err := yamldocs.Objects([]byte(manifest))
	if err != nil {
		return nil, err
	}
	nodes = slices.DeleteFunc(nodes, func(n *yaml.RNode) bool { return len(n.YNode().Content) == 0 })
	// Helm's client (helm-controller's install and upgrade) and Argo CD's
	// repo server read a chart's output as YAML 1.1: an unquoted on is
	// the boolean they apply (TestChartOutputIsReadAsYAML11).
	for _, n := range nodes {
		render.AsYAML11(n.YNode())
	}
	return nodes, nil
}

// postRender applies the kustomize post-renderers in order, then
// helm-controller's origin labels and spec.commonMetadata, to the
// chart's manifests.
func (p *Prepared) postRender(ctx context.Context, manifest string) ([]*yaml.RNode, error) {
	r := p.Release
	k := p.env.Kustomizer
	for i, pr := range r.Spec.PostRenderers {
		if pr.Kustomize == nil {
			continue
		}
		if k == nil {
			k = render.NewKustomizer(render.Options{LoadRestrictorNone: true})
		}
		out, err := kustomizeRun(ctx, k, manifest, pr.Kustomize)
		if err != nil {
			return nil, fmt.Errorf("postRenderers[%d]: %w", i, err)
		}
		manifest = out
	}
	objs, err := parse(manifest)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	var annotations map[string]string
	if cm := r.Spec.CommonMetadata; cm != nil {
		maps.Copy(labels, cm.Labels)
		annotations = cm.Annotations
	}
	labels[Group+"/name"] = r.Name
	labels[Group+"/namespace"] = r.Namespace
	for _, o := range objs {
		l := o.GetLabels()
		maps.Copy(l, labels)
		if err := o.SetLabels(l); err != nil {
			return nil, err
		}
		if len(annotations) > 0 {
			a := o.GetAnnotations()
			maps.Copy(a, annotations)
			if err := o.SetAnnotations(a); err != nil {
				return nil, err
			}
		}
	}
	return objs, nil
}

// kustomizeRun is helm-controller's kustomize post-renderer: the
// manifests as the one resource of a kustomization with the patches and
// images, built on an in-memory file system.
func kustomizeRun(ctx context.Context, k *render.Kustomizer, manifest string, pr *KustomizePostRenderer) (string, error) {
	kust := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []any{"helm-output.yaml"},
	}
	if len(pr.Images) > 0 {
		kust["images"] = pr.Images
	}
	var patches []any
	for _, pt := range pr.Patches {
		patches = append(patches, pt)
	}
	for _, pt := range pr.PatchesStrategicMerge {
		b, err := sigsyaml.Marshal(pt)
		if err != nil {
			return "", err
		}
		patches = append(patches, map[string]any{"patch": string(b)})
	}
	for _, pt := range pr.PatchesJSON6902 {
		ops, err := sigsyaml.Marshal(pt["patch"])
		if err != nil {
			return "", err
		}
		patches = append(patches, map[string]any{"target": pt["target"], "patch": string(ops)})
	}
	if len(patches) > 0 {
		kust["patches"] = patches
	}
	kb, err := sigsyaml.Marshal(kust)
	if err != nil {
		return "", err
	}
	fs := filesys.MakeFsInMemory()
	dir := snapshot.Abs("helm-post-render")
	if err := fs.MkdirAll(dir); err != nil {
		return "", err
	}
	if err := fs.WriteFile(dir+"/kustomization.yaml", kb); err != nil {
		return "", err
	}
	if err := fs.WriteFile(dir+"/helm-output.yaml", []byte(manifest)); err != nil {
		return "", err
	}
	objs, err := k.RenderContext(ctx, fs, "helm-post-render", false)
	if err != nil {
		return "", errors.New(strings.ReplaceAll(err.Error(), "helm-post-render", "the rendered chart"))
	}
	var b strings.Builder
	for _, o := range objs {
		s, err := o.String()
		if err != nil {
			return "", err
		}
		b.WriteString("---\n" + s)
	}
	return b.String(), nil
}

// setNamespaces gives the release namespace to objects that set none,
// unless cluster-scoped: by Kubernetes' built-in kinds, or a CRD among
// objs that says so; an unknown kind is taken as namespaced, as most
// custom resources are.
func setNamespaces(objs []*yaml.RNode, ns string) error {
	cluster := map[string]bool{} // group/kind
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		scope, _ := o.Pipe(yaml.Lookup("spec", "scope"))
		group, _ := o.Pipe(yaml.Lookup("spec", "group"))
		kind, _ := o.Pipe(yaml.Lookup("spec", "names", "kind"))
		if scope != nil && group != nil && kind != nil && yaml.GetValue(scope) == "Cluster" {
			cluster[yaml.GetValue(group)+"/"+yaml.GetValue(kind)] = true
		}
	}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		api := o.GetApiVersion()
		group := ""
		if i := strings.LastIndex(api, "/"); i >= 0 {
			group = api[:i]
		}
		if cluster[group+"/"+o.GetKind()] {
			continue
		}
		if namespaced, known := render.NamespaceScoped(api, o.GetKind()); known && !namespaced {
			continue
		}
		if err := o.SetNamespace(ns); err != nil {
			return fmt.Errorf("set the namespace of %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}
