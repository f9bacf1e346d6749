package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The Argo CD case plans a synthetic repository of argoApps Argo CD
// Applications, written by the bench into a temporary git repository (no
// testdata: its shape is below), and a pull request changing one of them:
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
// kustomize.images, as Renovate would. kplan's changed-only plan is
// measured beside its --full plan of the same commits (each checked to
// say the same), wall time, CPU and peak RSS.
const (
	argoRepoURL   = "https://github.com/example/fleet.git"
	argoChanged   = "apps/kustomize/shop-007.yaml"
	argoImageOld  = "registry.example.com/shop:1.0.7"
	argoImageNew  = "registry.example.com/shop:1.0.8"
	argoBudget    = time.Second
	argoBudgetRSS = 256 << 20
)

// runArgo builds kplan (unless given) and runs the Argo CD case.
func runArgo(ctx context.Context, l *ledger, apps int, kplan string, runs int, keep bool) error {
	return inWork(ctx, "kplan-bench-argocd-", kplan, keep, func(work, kplan string) error {
		return argoBench(ctx, l, work, kplan, apps, runs)
	})
}

func argoBench(ctx context.Context, l *ledger, work, kplan string, apps, runs int) error {
	step(fmt.Sprintf("Argo CD: write a repository of %d Applications", apps))
	dir := filepath.Join(work, "argocd-repo")
	files, err := writeArgoRepo(dir, apps)
	if err != nil {
		return err
	}
	git := func(args ...string) error { return command(ctx, dir, "git", args...) }
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"remote", "add", "origin", argoRepoURL},
		{"add", "-A"}, {"commit", "-qm", "base"},
	} {
		if err := git(args...); err != nil {
			return err
		}
	}
	if err := replaceIn(filepath.Join(dir, argoChanged), argoImageOld, argoImageNew); err != nil {
		return err
	}
	if err := git("commit", "-qam", "bump one image"); err != nil {
		return err
	}
	fmt.Printf("\nArgo CD: %d Applications (%d files); the pull request bumps an image in %s\n", apps, files, argoChanged)
	if err := sameAsFull(ctx, kplan, dir, "one Application changed", "HEAD~", "HEAD", []string{"--argocd"}); err != nil {
		return err
	}
	diff := func(extra ...string) []string {
		return append([]string{kplan, "diff", "-C", dir, "--base", "HEAD~", "--head", "HEAD", "--format", "json", "--fail-on-error=false", "--argocd"}, extra...)
	}
	benches := []*bench{
		{name: "kplan --full", run: func() (measure, error) { return kplanRun(ctx, diff("--full"), "") }},
		{name: "kplan, one Application", run: func() (measure, error) { return kplanRun(ctx, diff(), "") }},
	}
	for i := range runs {
		for _, b := range benches {
			step(fmt.Sprintf("Argo CD run %d/%d: %s", i+1, runs, b.name))
			m, err := b.run()
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			b.ms = append(b.ms, m)
		}
	}
	fmt.Printf("\nArgo CD plans, best of %d runs (median in brackets; CPU user+sys of the best run), peak RSS the highest of the runs\n\n", runs)
	fmt.Printf("%-26s %18s %10s %10s   %s\n", "", "wall", "CPU", "peak RSS", "work")
	for _, b := range benches {
		m := b.best()
		fmt.Printf("%-26s %8s [%7s] %10s %6d MiB   %s\n", b.name, round(m.wall), round(b.median()), round(m.cpu), b.peakRSS()>>20, m.stats)
	}
	full, one := benches[0], benches[1]
	prefix := fmt.Sprintf("argocd %d/", apps)
	l.record(prefix+full.name, full.ms, "")
	l.record(prefix+one.name, one.ms, prefix+full.name)
	fmt.Printf("\none Application vs --full:  %5.1fx faster (wall), %5.1fx less CPU, %4.1fx less peak RSS\n",
		ratio(full.best().wall, one.best().wall), ratio(full.best().cpu, one.best().cpu), float64(full.peakRSS())/float64(one.peakRSS()))
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT MET"
	}
	fmt.Printf("one Application: %s (target at most %s: %s), %d MiB (target at most %d MiB: %s)\n",
		round(one.best().wall), argoBudget, verdict(one.best().wall <= argoBudget),
		one.peakRSS()>>20, argoBudgetRSS>>20, verdict(one.peakRSS() <= argoBudgetRSS))
	fmt.Printf("phases of the one-Application plan: %s\n", one.best().phases)
	return nil
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
