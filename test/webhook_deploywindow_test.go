package test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge/github"
	"github.com/kplan-dev/kplan/internal/forge/github/deploys"
	"github.com/kplan-dev/kplan/internal/gitmirror"
	"github.com/kplan-dev/kplan/internal/status"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/internal/webhook"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// testClock is a deployer.Clock the test moves: timers fire when Set
// passes them, never on their own.
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*testTimer
}

type testTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &testTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// Set moves the clock to now and fires the timers due by then.
func (c *testClock) Set(now time.Time) {
	c.mu.Lock()
	c.now = now
	var due []func()
	keep := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.stopped:
		case !tm.at.After(now):
			tm.stopped = true
			due = append(due, tm.f)
		default:
			keep = append(keep, tm)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// startInProcess runs the webhook's handler and deployer in this
// process, as cmd/webhook wires them, with the deployer reading clock:
// deploy windows open when the test says. It reports to the fake
// GitHub and deploys to the test cluster.
func (e *hookEnv) startInProcess(yaml string, clock deployer.Clock) (*deployer.Deployer, *status.Board) {
	t := e.t
	t.Helper()
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "webhook.yaml"), []byte(strings.ReplaceAll(yaml, "KUBECONFIG", e.cluster.Kubeconfig)))
	if err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(t.TempDir(), "webhook.log"))
	if err != nil {
		t.Fatal(err)
	}
	e.log = logs.Name()
	log := slog.New(slog.NewJSONHandler(logs, nil))
	rep := deploys.NewReporter(e.gh.Client(hookToken), log)
	var targets []deployer.Target
	for _, ref := range cfg.AllTargets() {
		targets = append(targets, deployer.TargetOf(ref))
	}
	engine := func(t deployer.Target) deployer.Engine { return deploy.New(deploy.NewGetter(t.Kubeconfig, t.Context)) }
	dep := deployer.New(targets, deployer.GitMirror{Mirrors: &gitmirror.Mirrors{Dir: t.TempDir(), Token: []byte(hookToken), Logger: log}}, rep, engine, log)
	dep.Reviews, dep.Clock, dep.DeployNowLabel = rep, clock, cfg.DeployNowLabel
	dep.Resync, dep.GitBases = time.Hour, t.TempDir()
	board := &status.Board{}
	board.Declare(targets...)
	dep.Status = board
	h, err := webhook.New(webhook.Options{Secret: []byte(hookSecret), Config: cfg, Receiver: github.Receiver{}, Logger: log,
		Enqueue: func(i webhook.Intent) {
			for _, tg := range i.Targets {
				dep.Submit(tg.Name, deployer.Request{SHA: i.SHA, PR: i.PR, Delivery: i.DeliveryID, Acknowledged: i.AcknowledgedBy, DeployNow: i.DeployNowBy})
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	e.url = srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		dep.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		logs.Close()
		if t.Failed() {
			data, _ := os.ReadFile(e.log)
			t.Logf("webhook log:\n%s", tailLines(string(data), 40))
		}
	})
	return dep, board
}

// labeledPRPayload is GitHub's delivery of sender adding label to the
// merged pull request number, whose merge is sha.
func labeledPRPayload(t *testing.T, number int, sha, label, sender string) []byte {
	return fixture(t, "pull_request/closed.payload.json", func(ev map[string]any) {
		ev["action"], ev["number"] = "labeled", number
		ev["label"] = map[string]any{"name": label}
		ev["sender"].(map[string]any)["login"] = sender
		pr := ev["pull_request"].(map[string]any)
		pr["number"], pr["merged"], pr["merge_commit_sha"] = number, true, sha
		pr["base"].(map[string]any)["ref"] = "main"
	})
}

// A target with deploy windows, on the real apiserver with a clock the
// test moves: a merge outside its window waits, reported "waiting for
// the window at …" with nothing applied; a newer merge replaces it; a
// reader's deploy-now label does not move it; when the window opens the
// newest commit deploys. Outside the window again, a writer's label
// deploys at once, and the report records who overrode the window.
func TestWebhookDeployWindows(t *testing.T) {
	t.Parallel()
	e, root := newHookBase(t, hookRepo)
	gitSrv := githttp.Serve(t, root, hookToken)
	e.gh.AddToken(hookToken, githubapi.Identity{Login: "kplan[bot]"})
	e.gh.SetPermission("Codertocat", "Hello-World", "alice", "write")
	e.gh.SetPermission("Codertocat", "Hello-World", "mallory", "triage")
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	clock := &testClock{now: at("2026-11-27 10:00")} // a Friday, in the window
	sha1 := e.commit("a")
	dep, board := e.startInProcess(`apiVersion: kplan.dev/v1alpha1
kind: WebhookConfig
repositories:
  - name: `+hookRepo+`
    cloneURL: `+gitSrv.URL+"/"+hookRepo+`.git
    branches:
      - name: main
        targets:
          - name: prod
            overlay: app
            environment: production
            kubeconfig: KUBECONFIG
            reconcileTimeout: 20s
            deployWindows:
              - {days: [Mon-Fri], hours: "09:00-17:00", timeZone: Europe/Berlin}
apiBaseURL: `+e.gh.URL()+`/
`, clock)
	e.waitDeployed(sha1)

	// Saturday: merge 2 waits for Monday's window, nothing applied.
	clock.Set(at("2026-11-28 12:00"))
	const waiting = "waiting for the window at 2026-11-30 09:00 CET (deploy windows: Mon,Tue,Wed,Thu,Fri 09:00-17:00 Europe/Berlin; to deploy now, a user with write access adds the label kplan/deploy-now to the merged pull request)"
	sha2 := e.commit("a", "b")
	if code := e.send("pull_request", mergedPRPayload(t, 2, sha2), "", true); code != http.StatusAccepted {
		t.Fatalf("merge 2: HTTP %d", code)
	}
	e.statusSays(sha2, "kplan/prod", "pending", "waiting for the window at 2026-11-30 09:00 CET (deploy windows: Mon,Tue")
	if body := e.deployComment(2, "⏳ "+waiting); !strings.Contains(body, "0 of 1 targets succeeded, 1 waiting") {
		t.Errorf("the deploy comment of merge 2:\n%s", body)
	}
	eq(t, "ConfigMaps while merge 2 waits", e.configMaps(), []string{"a"})
	if sha, _ := e.deployed(); sha != sha1 {
		t.Errorf("the cluster records %s while merge 2 waits, want %s", short(sha), short(sha1))
	}
	st := dep.States()
	if len(st) != 1 || st[0].SHA != sha2 || st[0].Waiting != waiting || !st[0].WindowOpens.Equal(at("2026-11-30 09:00")) {
		t.Errorf("the deployer's state while merge 2 waits: %+v", st)
	}
	// The status page's queue says so too (told once the worker is done).
	testkit.Eventually(t, "the status page to show prod waiting for its window", 30*time.Second, func() bool {
		q := board.Page().Queue
		return len(q) == 1 && q[0].State == "waiting" && q[0].Reason == waiting
	})

	// Merge 3 arrives meanwhile, and mallory, who may only triage, adds
	// the deploy-now label to it: it still waits, saying why the label
	// did not count.
	sha3 := e.commit("a", "b", "c")
	if code := e.send("pull_request", mergedPRPayload(t, 3, sha3), "", true); code != http.StatusAccepted {
		t.Fatalf("merge 3: HTTP %d", code)
	}
	e.statusSays(sha3, "kplan/prod", "pending", "waiting for the window at 2026-11-30 09:00 CET")
	if code := e.send("pull_request", labeledPRPayload(t, 3, sha3, "kplan/deploy-now", "mallory"), "", true); code != http.StatusAccepted {
		t.Fatalf("mallory's label: HTTP %d", code)
	}
	e.statusSays(sha3, "kplan/prod", "pending", "waiting for the window at 2026-11-30 09:00 CET; @mallory added the label kplan/deploy-now but may not write")
	e.deployComment(3, "@mallory added the label kplan/deploy-now but may not write to Codertocat/Hello-World: only a user with write access can deploy outside the windows")
	eq(t, "ConfigMaps after mallory's label", e.configMaps(), []string{"a"})

	// Monday 09:00: the window opens and the newest merge deploys.
	clock.Set(at("2026-11-30 09:00"))
	e.waitDeployed(sha3)
	eq(t, "ConfigMaps once the window opened", e.configMaps(), []string{"a", "b", "c"})
	e.statusSays(sha3, "kplan/prod", "success", "")
	e.deployComment(3, "1 of 1 targets succeeded")
	// Merge 2, which waited, went with merge 3: its reports say so.
	e.statusSays(sha2, "kplan/prod", "success", "superseded: deployed with the branch's newer commit "+short(sha3))
	e.deployComment(2, "✅ superseded: deployed with the branch's newer commit "+short(sha3))

	// Saturday again: merge 4 waits until alice, a writer, adds the
	// label: it deploys at once, and the reports say she overrode the
	// window.
	clock.Set(at("2026-12-05 10:00"))
	sha4 := e.commit("a", "b", "c", "d")
	if code := e.send("pull_request", mergedPRPayload(t, 4, sha4), "", true); code != http.StatusAccepted {
		t.Fatalf("merge 4: HTTP %d", code)
	}
	e.statusSays(sha4, "kplan/prod", "pending", "waiting for the window at 2026-12-07 09:00 CET")
	eq(t, "ConfigMaps while merge 4 waits", e.configMaps(), []string{"a", "b", "c"})
	if code := e.send("pull_request", labeledPRPayload(t, 4, sha4, "kplan/deploy-now", "alice"), "", true); code != http.StatusAccepted {
		t.Fatalf("alice's label: HTTP %d", code)
	}
	e.waitDeployed(sha4)
	const override = "deployed outside its deploy windows: @alice added the label kplan/deploy-now"
	e.deployComment(4, "⏩ "+override)
	eq(t, "ConfigMaps after alice's label", e.configMaps(), []string{"a", "b", "c", "d"})
	inv, err := e.dyn.Resource(rgGVR).Namespace(hookNS).Get(context.Background(), "inventory-00000042", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if msg := inv.GetAnnotations()[deploy.AnnotationMessage]; !strings.Contains(msg, override) {
		t.Errorf("the inventory's message %q does not record the override", msg)
	}
	if st := dep.States(); len(st) != 1 || st[0].LastSHA != sha4 || st[0].Override != override || st[0].Waiting != "" {
		t.Errorf("the deployer's state after the override: %+v", st)
	}
	if p := board.Page(); len(p.Targets) != 1 || len(p.Targets[0].Deploys) == 0 || p.Targets[0].Deploys[0].Override != override || p.Targets[0].Deploys[0].SHA != sha4 {
		t.Errorf("the status page's last deploy does not record the override: %+v", p.Targets)
	}
}
