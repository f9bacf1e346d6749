package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// The Argo CD case plans synthetic repositories of Argo CD Applications,
// written by the bench into temporary git repositories (no testdata:
// their shape is below), and a pull request changing one of them:
//
//   - 40% kustomize sources: an overlay per Application on a shared base,
//     the Application's kustomize: settings (namePrefix, images, labels);
//   - 20% Helm charts of their own (Chart.yaml, values, templates), with
//     the Application's valueFiles and parameters;
//   - 10% a shared chart with multi-source $ref value files, one per
//     Application;
//   - 20% directory sources (recurse);
//   - 10% made by an ApplicationSet's git directory generator.
//
// The pull request bumps the image of one kustomize Application in its
// kustomize.images, as Renovate would; its second push bumps it again.
// At each size of the curve (argoSizes: 500, 2,000 and 5,000
// Applications) kplan's changed-only plan is measured beside its --full
// plan of the same commits (each checked to say the same): with no cache
// (cold); with the render cache a plan of the base left (warm from main:
// the Action's default, main's push plan warms the cache the pull
// request's plans restore, whose index of Argo CD Applications then
// serves the base); and the second push with the render cache of the
// first. CPU (user+sys, git's included), wall time and peak RSS. The
// repositories are packed, as a CI checkout is (loose objects cost 2.6x
// in git reads).
const (
	argoRepoURL   = "https://github.com/example/fleet.git"
	argoChanged   = "apps/kustomize/shop-007.yaml"
	argoImageOld  = "registry.example.com/shop:1.0.7"
	argoImageNew  = "registry.example.com/shop:1.0.8"
	argoImageNext = "registry.example.com/shop:1.0.9"
	argoBudget    = time.Second
	argoBudgetRSS = 256 << 20
	// argoBudgetGrowth bounds the one-Application plan's CPU at the
	// curve's largest size against its smallest.
	argoBudgetGrowth = 1.5
)

// argoCurve are the sizes of the Argo CD curve.
var argoCurve = []int{500, 2000, 5000}

// argoSizes are the sizes measured for -argocd-apps max: the curve's up
// to max, and max.
func argoSizes(max int) []int {
	var out []int
	for _, n := range argoCurve {
		if n < max {
			out = append(out, n)
		}
	}
	return append(out, max)
}

// runArgo builds kplan (unless given) and runs the Argo CD case at each
// size up to apps.
func runArgo(ctx context.Context, l *ledger, apps int, kplan string, runs int, keep bool) error {
	return inWork(ctx, "kplan-bench-argocd-", kplan, keep, func(work, kplan string) error {
		var points []*argoPoint
		for _, n := range argoSizes(apps) {
			p, err := argoBench(ctx, l, work, kplan, n, runs)
			if err != nil {
				return err
			}
			points = append(points, p)
		}
		argoCurveReport(points, runs)
		return nil
	})
}

// argoPoint is the Argo CD case at one size.
type argoPoint struct {
	apps, files           int
	full, one, main, warm *bench
}

func argoBench(ctx context.Context, l *ledger, work, kplan string, apps, runs int) (*argoPoint, error) {
	step(fmt.Sprintf("Argo CD: write a repository of %d Applications", apps))
	dir := filepath.Join(work, fmt.Sprintf("argocd-%d", apps))
	files, err := writeArgoRepo(dir, apps)
	if err != nil {
		return nil, err
	}
	git := func(args ...string) error { return command(ctx, dir, "git", args...) }
	push := func(from, to, msg string) error {
		if err := replaceIn(filepath.Join(dir, argoChanged), from, to); err != nil {
			return err
		}
		return git("commit", "-qam", msg)
	}
	for _, step := range []func() error{
		func() error { return git("init", "-q", "-b", "main") },
		func() error { return git("remote", "add", "origin", argoRepoURL) },
		func() error { return git("add", "-A") },
		func() error { return git("commit", "-qm", "base") },
		func() error { return push(argoImageOld, argoImageNew, "bump one image") },
		func() error { return push(argoImageNew, argoImageNext, "bump it again") },
		// A CI checkout is packed.
		func() error { return git("repack", "-adq") },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	const base, head, head2 = "HEAD~2", "HEAD~", "HEAD"
	for _, c := range []struct{ name, head string }{{"one Application changed", head}, {"its second push", head2}} {
		if err := sameAsFull(ctx, kplan, dir, fmt.Sprintf("%d Applications, %s", apps, c.name), base, c.head, []string{"--argocd"}); err != nil {
			return nil, err
		}
	}
	diff := func(head string, extra ...string) []string {
		return append([]string{kplan, "diff", "-C", dir, "--base", base, "--head", head, "--format", "json", "--fail-on-error=false", "--argocd"}, extra...)
	}
	cache := filepath.Join(work, fmt.Sprintf("cache-%d", apps))
	// main's push plan of the base, with --warm-cache as the Action's
	// push plans.
	fromMain := func() error {
		os.RemoveAll(cache)
		_, err := kplanRun(ctx, diff(base, "--cache-dir", cache, "--warm-cache"), "")
		return err
	}
	if err := fromMain(); err != nil {
		return nil, err
	}
	if err := sameAsFull(ctx, kplan, dir, fmt.Sprintf("%d Applications, from main's cache", apps), base, head, []string{"--argocd", "--cache-dir", cache}); err != nil {
		return nil, err
	}
	p := &argoPoint{apps: apps, files: files,
		full: &bench{name: "kplan --full", run: func() (measure, error) { return kplanRun(ctx, diff(head, "--full"), "") }},
		one:  &bench{name: "kplan, one Application", run: func() (measure, error) { return kplanRun(ctx, diff(head), "") }},
		main: &bench{name: "from main's cache", run: func() (measure, error) {
			if err := fromMain(); err != nil {
				return measure{}, err
			}
			return kplanRun(ctx, diff(head, "--cache-dir", cache), "")
		}},
		warm: &bench{name: "2nd push, cached", run: func() (measure, error) {
			// The first push fills the cache; the second is measured.
			os.RemoveAll(cache)
			if _, err := kplanRun(ctx, diff(head, "--cache-dir", cache), ""); err != nil {
				return measure{}, err
			}
			return kplanRun(ctx, diff(head2, "--cache-dir", cache), "")
		}},
	}
	benches := []*bench{p.full, p.one, p.main, p.warm}
	for i := range runs {
		for _, b := range benches {
			step(fmt.Sprintf("Argo CD, %d Applications, run %d/%d: %s", apps, i+1, runs, b.name))
			m, err := b.run()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.name, err)
			}
			b.ms = append(b.ms, m)
		}
	}
	fmt.Printf("\nArgo CD: %d Applications (%d files, packed); the pull request bumps an image in %s\n", apps, files, argoChanged)
	fmt.Printf("%-26s %18s %10s   %s\n", "", "wall", "CPU", "peak RSS")
	for _, b := range benches {
		fmt.Printf("%-26s %8s [%7s] %10s %6d MiB\n", b.name, round(b.best().wall), round(b.median()), round(b.leastCPU()), b.peakRSS()>>20)
	}
	fmt.Printf("phases of the one-Application plan: %s; from main's cache: %s\n", p.one.best().phases, p.main.best().phases)
	prefix := fmt.Sprintf("argocd %d/", apps)
	l.record(prefix+p.full.name, p.full.ms, "")
	l.record(prefix+p.one.name, p.one.ms, prefix+p.full.name)
	l.record(prefix+p.main.name, p.main.ms, prefix+p.full.name)
	l.record(prefix+p.warm.name, p.warm.ms, prefix+p.full.name)
	return p, nil
}

// argoCurveReport prints the curve: each size's plans, and the largest
// size's one-Application plan against the smallest's.
func argoCurveReport(points []*argoPoint, runs int) {
	fmt.Printf("\nArgo CD curve (load average %s, %d cores; CPU user+sys, the least of %d runs; wall the best; peak RSS the highest)\n\n", loadAverage(), runtime.NumCPU(), runs)
	fmt.Printf("%6s %6s   %-26s   %-26s   %-26s   %-26s\n", "apps", "files", "one Application (cold)", "from main's cache (warm)", "2nd push, cached", "--full")
	cell := func(b *bench) string {
		return fmt.Sprintf("%7s %7s %4d MiB", round(b.leastCPU()), round(b.best().wall), b.peakRSS()>>20)
	}
	for _, p := range points {
		fmt.Printf("%6d %6d   %-26s   %-26s   %-26s   %-26s\n", p.apps, p.files, cell(p.one), cell(p.main), cell(p.warm), cell(p.full))
	}
	if len(points) < 2 {
		return
	}
	small, large := points[0], points[len(points)-1]
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT MET"
	}
	growth := func(b func(*argoPoint) *bench) float64 { return ratio(b(large).leastCPU(), b(small).leastCPU()) }
	one := growth(func(p *argoPoint) *bench { return p.one })
	warm := growth(func(p *argoPoint) *bench { return p.main })
	fmt.Printf("\n%d vs %d Applications, one-Application change, CPU (target at most %.1fx):\n", large.apps, small.apps, argoBudgetGrowth)
	fmt.Printf("  cold (no cache)           %.2fx: %s\n", one, verdict(one <= argoBudgetGrowth))
	fmt.Printf("  warm (from main's cache)  %.2fx: %s (%.2fx the cold plan at %d)\n", warm, verdict(warm <= argoBudgetGrowth),
		ratio(large.main.leastCPU(), small.one.leastCPU()), small.apps)
	fmt.Printf("  2nd push, cached          %.2fx\n", growth(func(p *argoPoint) *bench { return p.warm }))
	fmt.Printf("  --full                    %.2fx\n", growth(func(p *argoPoint) *bench { return p.full }))
	for _, b := range []*bench{large.one, large.main} {
		fmt.Printf("%s at %d: %s wall (target at most %s: %s), %d MiB (target at most %d MiB: %s)\n", b.name, large.apps,
			round(b.best().wall), argoBudget, verdict(b.best().wall <= argoBudget),
			b.peakRSS()>>20, argoBudgetRSS>>20, verdict(b.peakRSS() <= argoBudgetRSS))
	}
}

// writeArgoRepo writes the synthetic repository and returns its number
// of files.
func writeArgoRepo(dir string, apps int) (int, error) {
	files := map[string]string{
		"README.md":                    "A synthetic Argo CD repository written by kplan's bench.\n",
		"bases/web/kustomization.yaml": "resources:\n  - deployment.yaml\n  - service.yaml\n",
		"bases/web/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example.com/web:1.0
          ports: [{containerPort: 8080}]
          resources:
            requests: {cpu: 10m, memory: 32Mi}
`,
		"bases/web/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`,
		"charts/common/Chart.yaml":                "apiVersion: v2\nname: common\nversion: 1.0.0\n",
		"charts/common/values.yaml":               "image: registry.example.com/api:1.0\nreplicas: 1\nenv: {}\n",
		"charts/common/templates/deployment.yaml": argoChartTemplate,
		"charts/common/templates/configmap.yaml":  argoChartConfigMap,
		"appsets/generated.yaml": `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: generated
  namespace: argocd
spec:
  goTemplate: true
  generators:
    - git:
        repoURL: ` + argoRepoURL + `
        revision: HEAD
        directories:
          - path: generated/*
  template:
    metadata:
      name: 'gen-{{ .path.basename }}'
    spec:
      project: default
      source:
        repoURL: ` + argoRepoURL + `
        targetRevision: HEAD
        path: '{{ .path.path }}'
      destination:
        server: https://kubernetes.default.svc
        namespace: '{{ .path.basename }}'
      syncPolicy:
        automated: {prune: true}
`,
	}
	app := func(name, source string) string {
		return `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: ` + name + `
  namespace: argocd
  finalizers: [resources-finalizer.argocd.argoproj.io]
spec:
  project: default
` + source + `  destination:
    server: https://kubernetes.default.svc
    namespace: ` + name + `
  syncPolicy:
    automated: {prune: true}
`
	}
	for i := range apps {
		switch k := i * 10 / apps; {
		case k < 4: // kustomize
			n := fmt.Sprintf("shop-%03d", i)
			files["kustomize/"+n+"/kustomization.yaml"] = "resources:\n  - ../../bases/web\n  - configmap.yaml\n"
			files["kustomize/"+n+"/configmap.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  shard: %q\n  region: eu-west-%d\n", n, i%3)
			files["apps/kustomize/"+n+".yaml"] = app(n, fmt.Sprintf(`  source:
    repoURL: %s
    targetRevision: HEAD
    path: kustomize/%s
    kustomize:
      namePrefix: %s-
      images:
        - registry.example.com/web=registry.example.com/shop:1.0.%d
      commonLabels:
        team: shop
`, argoRepoURL, n, n, i))
		case k < 6: // a chart of its own
			n := fmt.Sprintf("svc-%03d", i)
			files["helm/"+n+"/Chart.yaml"] = "apiVersion: v2\nname: " + n + "\nversion: 0.1.0\n"
			files["helm/"+n+"/values.yaml"] = "image: registry.example.com/" + n + ":1.0\nreplicas: 1\nenv: {}\n"
			files["helm/"+n+"/values-prod.yaml"] = fmt.Sprintf("replicas: %d\nenv:\n  TIER: prod\n", 2+i%3)
			files["helm/"+n+"/templates/deployment.yaml"] = argoChartTemplate
			files["helm/"+n+"/templates/configmap.yaml"] = argoChartConfigMap
			files["apps/helm/"+n+".yaml"] = app(n, fmt.Sprintf(`  source:
    repoURL: %s
    targetRevision: HEAD
    path: helm/%s
    helm:
      valueFiles: [values-prod.yaml]
      parameters:
        - name: env.SHARD
          value: "%d"
`, argoRepoURL, n, i))
		case k < 7: // the shared chart, $ref value files
			n := fmt.Sprintf("api-%03d", i)
			files["envs/"+n+".yaml"] = fmt.Sprintf("image: registry.example.com/api:1.%d\nenv:\n  NAME: %s\n", i, n)
			files["apps/common/"+n+".yaml"] = app(n, fmt.Sprintf(`  sources:
    - repoURL: %s
      targetRevision: HEAD
      path: charts/common
      helm:
        releaseName: %s
        valueFiles: [$values/envs/%s.yaml]
    - repoURL: %s
      targetRevision: HEAD
      ref: values
`, argoRepoURL, n, n, argoRepoURL))
		case k < 9: // directory
			n := fmt.Sprintf("jobs-%03d", i)
			files["plain/"+n+"/configmap.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  schedule: \"%d * * * *\"\n", n, i%60)
			files["plain/"+n+"/sub/cronjob.yaml"] = fmt.Sprintf(argoCronJob, n, i%60)
			files["apps/plain/"+n+".yaml"] = app(n, fmt.Sprintf(`  source:
    repoURL: %s
    targetRevision: HEAD
    path: plain/%s
    directory:
      recurse: true
`, argoRepoURL, n))
		default: // made by the ApplicationSet
			n := fmt.Sprintf("team-%03d", i)
			files["generated/"+n+"/kustomization.yaml"] = "resources:\n  - ../../bases/web\nnamePrefix: " + n + "-\n"
		}
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644); err != nil {
			return 0, err
		}
	}
	if !strings.Contains(files[argoChanged], argoImageOld) {
		return 0, fmt.Errorf("the synthetic repository has no %s in %s (-argocd-apps too small?)", argoImageOld, argoChanged)
	}
	return len(files), nil
}

const argoChartTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app: {{ .Release.Name }}}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: app
          image: {{ .Values.image }}
          env:
{{- range $k, $v := .Values.env }}
            - name: {{ $k }}
              value: {{ $v | quote }}
{{- end }}
`

const argoChartConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  release: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
`

const argoCronJob = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: %s
spec:
  schedule: "%d * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: job
              image: registry.example.com/jobs:1.0
`
