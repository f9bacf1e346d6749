package deployer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/testcluster"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// The fleet: targets spread over clusters, each target's overlay
// rendering a shared base of fleetBaseObjects objects, its own settings
// ConfigMap and its inventory.
const (
	fleetTargets     = 200
	fleetClusters    = 10
	fleetBaseObjects = 48
	fleetBusyProbes  = 9 // one-target merges during a merge to every target
	fleetIdleProbes  = 20
)

// BenchmarkFleet deploys a fleet of 200 targets (49 objects each, 9,800
// in all) over 10 clusters — 10 kubeconfig contexts of the test
// kube-apiserver, each deploying into its own namespace — from a real git
// repository served over smart HTTP, through the deployer as
// kplan-webhook wires it (git mirrors, the real apply engine, the
// comparison with reviews, which finds none here), for each
// --max-parallel-deploys of 1, the default and no limit. Each target
// deploys a branch of its own, moved only by the merges that change it
// (a delivery for a branch submits every target of the branch, so on one
// branch of 200 targets every merge would deploy all 200), one commit
// per merge, so that a deploy's comparison with reviews walks one step,
// as on a shared branch. Each sub-benchmark is a fresh deployer (a
// webhook's term) on the fleet left deployed by the one before, and
// measures:
//
//   - its start's resync of the 200 targets, every one already at the
//     branch's tip (what every resyncInterval costs);
//   - a merge touching every target, submitted to all 200 at once as its
//     delivery is, until every target reports; at each tenth of the fleet
//     deployed, a one-target merge to a target already deployed, from its
//     delivery (Submit) to its status (the Reporter's Finished);
//   - then 20 one-target merges, one after the other, the other 199
//     targets idle.
//
// Requests are counted on every request the engines send (a wrapping
// RoundTripper on their rest.Config), per deploy of the phase; CPU is
// this process's (the deployer), its children's (git, at both ends of
// every fetch: the git server's CGI processes are children too) and the
// kube-apiserver's and etcd's (from /proc); peak RSS is
// this process's VmHWM, reset at the start of each sub-benchmark. The
// table after the sub-benchmarks has the figures of docs/performance.md.
//
//	go test -run '^$' -bench Fleet -benchtime 1x -timeout 90m ./internal/deployer
func BenchmarkFleet(b *testing.B) {
	f := newFleet(b)
	loadBefore := loadAverage()
	cold := f.coldStart(b)
	var rows []fleetRow
	for _, limit := range []int{1, DefaultMaxParallel, 0} {
		b.Run("limit="+limitName(limit), func(b *testing.B) {
			row := f.measure(b, limit)
			rows = append(rows, row)
			b.ReportMetric(row.idleProbes.pct(0.5).Seconds()*1000, "idle-merge-p50-ms")
			b.ReportMetric(row.idleProbes.pct(0.99).Seconds()*1000, "idle-merge-p99-ms")
			b.ReportMetric(row.busyProbes.pct(0.5).Seconds()*1000, "busy-merge-p50-ms")
			b.ReportMetric(row.busyProbes.pct(0.99).Seconds()*1000, "busy-merge-p99-ms")
			b.ReportMetric(row.fleet.wall.Seconds(), "fleet-merge-s")
			b.ReportMetric(row.fleet.perDeploy(row.fleet.requests.total), "requests/deploy")
			b.ReportMetric(float64(row.peakRSS)/(1<<20), "peak-RSS-MiB")
		})
	}
	f.print(os.Stdout, cold, rows, loadBefore, loadAverage())
}

// fleet is the cluster, the repository and the targets the
// sub-benchmarks share.
type fleet struct {
	repo     string // the repository the git server serves
	mirrors  *gitmirror.Mirrors
	gitBases string
	targets  []Target
	// servers are the kube-apiserver's and etcd's process IDs.
	servers  []int
	requests requestCounter
	commits  int
}

func newFleet(b *testing.B) *fleet {
	c := testcluster.Start(b)
	f := &fleet{mirrors: &gitmirror.Mirrors{Dir: b.TempDir(), Token: []byte("tok")}, gitBases: b.TempDir(), servers: serverPIDs(b, c.Dir)}
	kubeconfig := f.contexts(b, c)
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		b.Fatal(err)
	}
	for i := range fleetClusters {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterName(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(b.Context(), ns, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	root := b.TempDir()
	f.repo = filepath.Join(root, "octo", "fleet.git")
	gittest.Git(b, root, "init", "-q", "--bare", "-b", "main", f.repo)
	files := fleetBase("0")
	for i := range fleetTargets {
		name, cluster := fmt.Sprintf("t%03d", i), clusterName(i%fleetClusters)
		dir := "clusters/" + cluster + "/" + name
		files[dir+"/kustomization.yaml"] = "namespace: " + cluster + "\nnamePrefix: " + name + "-\nresources:\n- ../../../base\n- settings.yaml\n- resourcegroup.yaml\n"
		files[dir+"/settings.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {merge: \"0\"}\n"
		files[dir+"/resourcegroup.yaml"] = "apiVersion: kpt.dev/v1alpha1\nkind: ResourceGroup\nmetadata: {name: inventory}\n"
		t := Target{Target: config.Target{Name: name, Overlay: dir, Environment: name, Namespace: cluster,
			Settings: config.Settings{Kubeconfig: kubeconfig, Context: cluster, Prune: true, ReconcileTimeout: config.DefaultReconcileTimeout}},
			Repo: "octo/fleet", Branch: "deploy/" + name, Forge: config.GitHub}
		f.targets = append(f.targets, t)
	}
	// One commit, the tip of every target's branch.
	var stream strings.Builder
	fastCommit(&stream, "refs/heads/main", "", "the fleet", files)
	for _, t := range f.targets {
		fmt.Fprintf(&stream, "reset refs/heads/%s\nfrom refs/heads/main\n\n", t.Branch)
	}
	f.fastImport(b, stream.String())
	srv := githttp.Serve(b, root, "tok")
	for i := range f.targets {
		f.targets[i].CloneURL = srv.URL + "/octo/fleet.git"
	}
	return f
}

func clusterName(i int) string { return fmt.Sprintf("cluster-%d", i) }

// contexts writes a kubeconfig with one context per cluster of the
// fleet, each the test cluster's own: each is a cluster to the
// deployer (an engine, an inventory lock).
func (f *fleet) contexts(b *testing.B, c *testcluster.Cluster) string {
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cur := kc.Contexts[kc.CurrentContext]
	for i := range fleetClusters {
		ctx := *cur
		ctx.Namespace = clusterName(i)
		kc.Contexts[clusterName(i)] = &ctx
	}
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// fleetBase is the base every target renders: ConfigMaps, Secrets,
// ServiceAccounts, Roles and RoleBindings (kinds that are current once
// applied: the test cluster has no controllers). round marks a merge
// touching every target.
func fleetBase(round string) map[string]string {
	files := map[string]string{}
	var res []string
	add := func(name, doc string) {
		files["base/"+name+".yaml"] = doc
		res = append(res, name+".yaml")
	}
	for i := range fleetBaseObjects {
		n := fmt.Sprintf("%02d", i)
		switch i % 8 {
		case 0:
			add("sa-"+n, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa-"+n+"}\n")
		case 1:
			add("role-"+n, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: role-"+n+"}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list, watch]\n")
		case 2:
			add("rb-"+n, "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb-"+n+"}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: role-"+fmt.Sprintf("%02d", i-1)+"}\nsubjects:\n- {kind: ServiceAccount, name: sa-"+fmt.Sprintf("%02d", i-2)+"}\n")
		case 3:
			add("secret-"+n, "apiVersion: v1\nkind: Secret\nmetadata: {name: secret-"+n+"}\nstringData: {password: "+strings.Repeat("s", 32)+"}\n")
		default:
			var data strings.Builder
			for k := range 10 {
				fmt.Fprintf(&data, "  key-%d: %q\n", k, strings.Repeat("v", 40))
			}
			add("cm-"+n, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-"+n+"}\ndata:\n"+data.String())
		}
	}
	files["base/cm-04.yaml"] += "  round: \"" + round + "\"\n"
	files["base/kustomization.yaml"] = "resources:\n- " + strings.Join(res, "\n- ") + "\n"
	return files
}

// fastCommit writes a commit of files on ref (on top of from, if set) to
// a git fast-import stream.
func fastCommit(w *strings.Builder, ref, from, msg string, files map[string]string) {
	fmt.Fprintf(w, "commit %s\ncommitter t <t@t> %d +0000\ndata %d\n%s\n", ref, time.Now().Unix(), len(msg), msg)
	if from != "" {
		fmt.Fprintf(w, "from %s\n", from)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", name, len(files[name]), files[name])
	}
	w.WriteString("\n")
}

// fastImport runs a git fast-import stream in the served repository: the
// branches it commits to move on the server, as a merge moves them.
func (f *fleet) fastImport(b *testing.B, stream string) {
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = f.repo
	cmd.Stdin = strings.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, out)
	}
}

// merge commits files on the branch of each target, and returns each
// branch's new tip by target key: a merge touching each.
func (f *fleet) merge(b *testing.B, msg string, files map[string]string, targets ...Target) map[string]string {
	f.commits++
	var stream strings.Builder
	for _, t := range targets {
		// ^0 reads the branch as the repository has it: fast-import
		// would start a branch it has not written from no parent.
		fastCommit(&stream, "refs/heads/"+t.Branch, "refs/heads/"+t.Branch+"^0", msg, files)
	}
	f.fastImport(b, stream.String())
	tips := map[string]string{}
	for _, line := range strings.Split(gittest.Git(b, f.repo, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/heads/deploy/"), "\n") {
		branch, sha, _ := strings.Cut(line, " ")
		tips[branch] = sha
	}
	out := map[string]string{}
	for _, t := range targets {
		out[t.Key()] = tips[t.Branch]
	}
	return out
}

// mergeOne is a merge changing target t alone.
func (f *fleet) mergeOne(b *testing.B, t Target) string {
	settings := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {merge: \"%d\"}\n", f.commits+1)
	return f.merge(b, "a merge to "+t.Name, map[string]string{t.Overlay + "/settings.yaml": settings}, t)[t.Key()]
}

// deployer is a term's deployer, as kplan-webhook wires it; engines
// counts the engines made (one per deploy that got past its render).
func (f *fleet) deployer(rep *fleetReport, limit int, engines *atomic.Int64) *Deployer {
	engine := func(t Target) Engine {
		engines.Add(1)
		return deploy.New(deploy.NewGetter(t.Kubeconfig, t.Context, f.requests.wrap))
	}
	// Production logs a JSON line or two per deploy.
	d := New(f.targets, GitMirror{f.mirrors}, rep, engine, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	d.Resync = time.Hour
	d.Reviews = noReviews{}
	d.GitBases = f.gitBases
	d.Slots = NewSlots(limit, nil)
	return d
}

// coldStart deploys every target a first time (creating every object),
// with the default limit.
func (f *fleet) coldStart(b *testing.B) phase {
	rep := newFleetReport()
	var engines atomic.Int64
	d := f.deployer(rep, DefaultMaxParallel, &engines)
	ctx, stop := f.run(b, d)
	defer stop()
	p := f.phase(func() {
		rep.waitAll(ctx, b, len(f.targets), nil)
	})
	p.deploys = len(f.targets)
	return p
}

// run runs d until the returned stop, which waits for it to end.
func (f *fleet) run(b *testing.B, d *Deployer) (context.Context, func()) {
	ctx, cancel := context.WithTimeout(b.Context(), 45*time.Minute)
	ran := make(chan struct{})
	go func() {
		d.Run(ctx)
		close(ran)
	}()
	return ctx, func() {
		cancel()
		<-ran
	}
}

// fleetRow is one sub-benchmark's figures.
type fleetRow struct {
	limit                  string
	resync, fleet, idle    phase
	busyProbes, idleProbes durations
	peakRSS                uint64 // bytes
	load                   string
}

func (f *fleet) measure(b *testing.B, limit int) fleetRow {
	row := fleetRow{limit: limitName(limit)}
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS(b)
	rep := newFleetReport()
	var engines atomic.Int64
	d := f.deployer(rep, limit, &engines)
	ctx, stop := f.run(b, d)
	defer stop()

	// The start's resync: every target already runs the tip, so each
	// renders, reads its inventory's record and stops there.
	row.resync = f.phase(func() {
		waitFor(ctx, b, "the resync of every target", func() bool {
			running, queued := d.Slots.counts()
			return engines.Load() == int64(len(f.targets)) && running == 0 && queued == 0
		})
	})
	row.resync.deploys = len(f.targets)

	// A merge touching every target, and one-target merges during it.
	base := fleetBase(fmt.Sprint(f.commits + 1)) // the first commit's is 0
	shas := f.merge(b, "a merge touching every target", map[string]string{"base/cm-04.yaml": base["base/cm-04.yaml"]}, f.targets...)
	rep.reset()
	row.fleet = f.phase(func() {
		for _, t := range f.targets {
			d.Submit(t.Key(), Request{SHA: shas[t.Key()], Delivery: "fleet"})
		}
		row.busyProbes = f.probeDuring(ctx, b, d, rep)
	})
	row.fleet.deploys = len(f.targets) + len(row.busyProbes)
	row.peakRSS = peakRSS(b)

	// One-target merges, one after the other, the fleet idle.
	row.idle = f.phase(func() {
		for i := range fleetIdleProbes {
			t := f.targets[(i*37+11)%len(f.targets)]
			sha := f.mergeOne(b, t)
			start := time.Now()
			d.Submit(t.Key(), Request{SHA: sha, Delivery: fmt.Sprint("idle-", i)})
			row.idleProbes = append(row.idleProbes, rep.wait(ctx, b, t, sha).Sub(start))
		}
	})
	row.idle.deploys = fleetIdleProbes
	row.load = loadAverage()
	if failed := rep.failures(); len(failed) > 0 {
		b.Errorf("%d deploys failed, the first: %s", len(failed), failed[0])
	}
	return row
}

// probeDuring waits for every target to report a deploy since the merge
// touching them all was submitted, making a one-target merge each time
// another tenth of them has reported (to a target that has, which then
// waits behind the deploys still queued), and returns the merges'
// delivery-to-status times.
func (f *fleet) probeDuring(ctx context.Context, b *testing.B, d *Deployer, rep *fleetReport) durations {
	type probe struct {
		t     Target
		sha   string
		start time.Time
	}
	var probes []probe
	next := 1
	rep.waitAll(ctx, b, len(f.targets), func(done []string) {
		for next <= fleetBusyProbes && len(done) >= next*len(f.targets)/(fleetBusyProbes+1) {
			t := f.byKey(done[next-1])
			sha := f.mergeOne(b, t)
			probes = append(probes, probe{t, sha, time.Now()})
			d.Submit(t.Key(), Request{SHA: sha, Delivery: fmt.Sprint("busy-", next)})
			next++
		}
	})
	var out durations
	for _, p := range probes {
		out = append(out, rep.wait(ctx, b, p.t, p.sha).Sub(p.start))
	}
	return out
}

func (f *fleet) byKey(key string) Target {
	i := slices.IndexFunc(f.targets, func(t Target) bool { return t.Key() == key })
	return f.targets[i]
}

// phase measures what run costs: its wall time, the requests the
// engines sent, this process's CPU and the cluster's.
func (f *fleet) phase(run func()) phase {
	f.requests.reset()
	self, children := rusage()
	server := f.serverCPU()
	start := time.Now()
	run()
	p := phase{wall: time.Since(start), requests: f.requests.snapshot()}
	self2, children2 := rusage()
	p.cpu, p.gitCPU, p.serverCPU = self2-self, children2-children, f.serverCPU()-server
	return p
}

// phase is what a phase of the benchmark cost.
type phase struct {
	wall, cpu, gitCPU, serverCPU time.Duration
	deploys                      int
	requests                     requestCounts
}

func (p phase) perDeploy(n int64) float64 { return float64(n) / float64(max(p.deploys, 1)) }

func (p phase) cpuPerDeploy(d time.Duration) string {
	return fmt.Sprintf("%d ms", (d / time.Duration(max(p.deploys, 1))).Milliseconds())
}

// print writes the figures as docs/performance.md shows them.
func (f *fleet) print(w io.Writer, cold phase, rows []fleetRow, loadBefore, loadAfter string) {
	fmt.Fprintf(w, "\nBenchmarkFleet: %d targets of %d objects in %d clusters (contexts of one kube-apiserver); GOMAXPROCS %d; load average %s at the start, %s at the end\n",
		fleetTargets, fleetBaseObjects+1, fleetClusters, runtime.GOMAXPROCS(0), loadBefore, loadAfter)
	fmt.Fprintf(w, "first deploy of every target (limit %d): %s, CPU per deploy %s here, %s in git, %s in the kube-apiserver and etcd; %.0f requests per deploy (%.0f discovery)\n\n",
		DefaultMaxParallel, cold.wall.Round(100*time.Millisecond), cold.cpuPerDeploy(cold.cpu), cold.cpuPerDeploy(cold.gitCPU), cold.cpuPerDeploy(cold.serverCPU),
		cold.perDeploy(cold.requests.total), cold.perDeploy(cold.requests.discovery))
	fmt.Fprintln(w, "| --max-parallel-deploys | one-target merge, fleet idle: p50 / p99 | one-target merge during a merge to all: p50 / p99 (n) | merge to all 200: wall | CPU per deploy: here / git / apiserver+etcd | requests per deploy (discovery, watches) | resync of 200 idle targets | peak RSS | load average after |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s / %s | %s / %s (%d) | %s | %s / %s / %s | %.0f (%.0f, %.0f) | %s, %.0f requests per target | %d MiB | %s |\n",
			r.limit, ms(r.idleProbes.pct(0.5)), ms(r.idleProbes.pct(0.99)), ms(r.busyProbes.pct(0.5)), ms(r.busyProbes.pct(0.99)), len(r.busyProbes),
			r.fleet.wall.Round(100*time.Millisecond), r.fleet.cpuPerDeploy(r.fleet.cpu), r.fleet.cpuPerDeploy(r.fleet.gitCPU), r.fleet.cpuPerDeploy(r.fleet.serverCPU),
			r.fleet.perDeploy(r.fleet.requests.total), r.fleet.perDeploy(r.fleet.requests.discovery), r.fleet.perDeploy(r.fleet.requests.watches),
			r.resync.wall.Round(100*time.Millisecond), r.resync.perDeploy(r.resync.requests.total), r.peakRSS>>20, r.load)
	}
	for _, r := range rows {
		fmt.Fprintf(w, "limit %s, one-target merges with the fleet idle: %.0f requests per deploy (%.0f discovery, %.0f watches, %.0f writes); CPU per deploy %s here, %s in git, %s in the kube-apiserver and etcd\n",
			r.limit, r.idle.perDeploy(r.idle.requests.total), r.idle.perDeploy(r.idle.requests.discovery), r.idle.perDeploy(r.idle.requests.watches), r.idle.perDeploy(r.idle.requests.writes),
			r.idle.cpuPerDeploy(r.idle.cpu), r.idle.cpuPerDeploy(r.idle.gitCPU), r.idle.cpuPerDeploy(r.idle.serverCPU))
	}
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func limitName(limit int) string {
	if limit <= 0 {
		return "none"
	}
	return strconv.Itoa(limit)
}

type durations []time.Duration

// pct is the p-th quantile (nearest rank); 0 for none.
func (ds durations) pct(p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// fleetReport is the forge: it records when each target reported each
// commit.
type fleetReport struct {
	mu       sync.Mutex
	reported map[string]time.Time // target key and SHA → when
	since    []string             // the targets that reported since reset, in order
	seen     map[string]bool
	failed   []string
	changed  chan struct{}
}

func newFleetReport() *fleetReport {
	return &fleetReport{reported: map[string]time.Time{}, seen: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (r *fleetReport) Started(context.Context, Target, string, int) {}

func (r *fleetReport) Finished(_ context.Context, o Outcome) {
	r.mu.Lock()
	r.reported[o.Target.Key()+"@"+o.SHA] = time.Now()
	if !r.seen[o.Target.Key()] {
		r.seen[o.Target.Key()] = true
		r.since = append(r.since, o.Target.Key())
	}
	if o.Err != nil {
		r.failed = append(r.failed, fmt.Sprintf("%s at %s: %v", o.Target.Key(), short(o.SHA), o.Err))
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *fleetReport) Interrupted(context.Context, Target) (bool, error) { return false, nil }
func (r *fleetReport) Flush(context.Context)                             {}

func (r *fleetReport) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.since, r.seen = nil, map[string]bool{}
}

func (r *fleetReport) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.failed)
}

// waitAll waits until n targets reported since reset, calling each, if
// set, with those that have at every report.
func (r *fleetReport) waitAll(ctx context.Context, b *testing.B, n int, each func(done []string)) {
	for {
		r.mu.Lock()
		done := slices.Clone(r.since)
		r.mu.Unlock()
		if each != nil {
			each(done)
		}
		if len(done) >= n {
			return
		}
		select {
		case <-r.changed:
		case <-ctx.Done():
			b.Fatalf("%d of %d targets reported: %v", len(done), n, ctx.Err())
		}
	}
}

// wait waits for t's report of sha and returns when it came.
func (r *fleetReport) wait(ctx context.Context, b *testing.B, t Target, sha string) time.Time {
	for {
		r.mu.Lock()
		at, ok := r.reported[t.Key()+"@"+sha]
		r.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-r.changed:
		case <-time.After(time.Second): // another waiter may have taken the signal
		case <-ctx.Done():
			b.Fatalf("no report of %s at %s: %v", t.Key(), short(sha), ctx.Err())
		}
	}
}

func waitFor(ctx context.Context, b *testing.B, what string, ok func() bool) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			b.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// noReviews is a forge where no pull request merged the commits: each
// deploy still runs the comparison with what was approved.
type noReviews struct{}

func (noReviews) Pulls(context.Context, Target, []string) ([]approval.Pull, error) { return nil, nil }
func (noReviews) ReviewedPlan(context.Context, Target, int) (*markers.Reviewed, error) {
	return nil, nil
}
func (noReviews) CanWrite(context.Context, Target, string) (bool, error) { return false, nil }

// requestCounter counts the requests the engines send.
type requestCounter struct {
	total, discovery, watches, writes atomic.Int64
}

type requestCounts struct{ total, discovery, watches, writes int64 }

var discoveryPath = regexp.MustCompile(`^/(api|apis|api/v1|apis/[^/]+/[^/]+|openapi/.*)$`)

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.total.Add(1)
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			c.watches.Add(1)
		case r.Method != http.MethodGet:
			c.writes.Add(1)
		case discoveryPath.MatchString(r.URL.Path):
			c.discovery.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) reset() {
	c.total.Store(0)
	c.discovery.Store(0)
	c.watches.Store(0)
	c.writes.Store(0)
}

func (c *requestCounter) snapshot() requestCounts {
	return requestCounts{c.total.Load(), c.discovery.Load(), c.watches.Load(), c.writes.Load()}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// rusage is this process's CPU time and that of its children waited for
// (git, and the git server's CGI processes).
func rusage() (self, children time.Duration) {
	var s, c syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(s.Utime) + tv(s.Stime), tv(c.Utime) + tv(c.Stime)
}

// serverPIDs finds the test cluster's processes: those whose command
// line names its directory.
func serverPIDs(b *testing.B, dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 2 {
		b.Logf("found %d processes of the test cluster, want etcd and kube-apiserver: their CPU is not measured", len(pids))
	}
	return pids
}

// serverCPU is the CPU time the cluster's processes used so far
// (/proc/PID/stat's utime and stime, in USER_HZ ticks of 10 ms).
func (f *fleet) serverCPU() time.Duration {
	var total time.Duration
	for _, pid := range f.servers {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command, which is in parentheses: state is
		// the first, utime the 12th, stime the 13th.
		_, rest, _ := bytes.Cut(data, []byte(") "))
		fields := strings.Fields(string(rest))
		if len(fields) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		s, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}

// resetPeakRSS makes VmHWM this process's resident set now (writing 5
// to /proc/self/clear_refs).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS, it is the process's since it started: %v", err)
	}
}

// peakRSS is VmHWM, this process's peak resident set, in bytes.
func peakRSS(b *testing.B) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}
