package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/liveplan"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func target(name, env, kubeconfig string) deployer.Target {
	return deployer.Target{Target: config.Target{Name: name, Overlay: "clusters/" + name, Environment: env, Settings: config.Settings{Kubeconfig: kubeconfig}},
		Repo: "o/r", Branch: "main", Forge: config.GitHub}
}

func board() *Board {
	return &Board{Keep: 2, Now: func() time.Time { return t0.Add(time.Hour) },
		Links: func(repo string) forge.Links {
			return forge.RepoLinks("https://github.example", repo, "/commit/%s", "/pull/%d")
		}}
}

var (
	prod     = target("prod", "production", "/k/prod.yaml")
	approved = &deployer.Review{Verdict: deployer.AsApproved, PR: 12, Commit: "a1b2c3d4e5f6", By: "alice", Forge: config.GitHub}
	refused  = &deployer.Review{Verdict: deployer.NotApproved, PR: 13, Forge: config.GitHub, Fix: "have a writer approve #13"}
)

func outcomeAt(sha string, pr int, minute int, err error, reason deployer.Reason, res *deploy.Result, r *deployer.Review) deployer.Outcome {
	start := t0.Add(time.Duration(minute) * time.Minute)
	return deployer.Outcome{Target: prod, SHA: sha, PR: pr, Err: err, Reason: reason, Result: res, Review: r,
		Started: start, Finished: start.Add(1500 * time.Millisecond)}
}

// What the deployer tells the board becomes what each target runs and
// its last deploys, as an operator reads them.
func TestBoardRecordsDeploys(t *testing.T) {
	applied := &deploy.Result{Objects: []deploy.ObjectResult{{Key: "v1/ConfigMap/hook/a", Action: deploy.Created}}}
	for _, tc := range []struct {
		name     string
		feed     func(b *Board)
		outcomes []string // of the deploys kept, newest first
		runs     string   // the commit the target runs, "" for none
		verdict  string   // of what runs, "" when not known
		check    func(t *testing.T, row Target)
	}{
		{
			name:     "a deploy as approved",
			feed:     func(b *Board) { b.Finished(outcomeAt("1111111aaaa", 12, 0, nil, "", applied, approved)) },
			outcomes: []string{Deployed}, runs: "1111111aaaa", verdict: "approved",
			check: func(t *testing.T, row Target) {
				d := row.Deploys[0]
				if d.Link != "https://github.example/o/r/commit/1111111aaaa" || d.ChangeRef != "#12" || d.ChangeLink != "https://github.example/o/r/pull/12" {
					t.Errorf("links: %+v", d.Commit)
				}
				if d.Duration() != "1.5s" || d.Objects != "1 created, 0 configured, 0 unchanged, 0 pruned" {
					t.Errorf("duration %q, objects %q", d.Duration(), d.Objects)
				}
				if a := row.Runs.Approval; a.By != "alice" || !a.Ok || a.Says != "applied exactly as approved in #12 at a1b2c3d by @alice" {
					t.Errorf("approval: %+v", a)
				}
			},
		},
		{
			name: "a refusal leaves what runs",
			feed: func(b *Board) {
				b.Finished(outcomeAt("1111111aaaa", 12, 0, nil, "", applied, approved))
				b.Finished(outcomeAt("2222222bbbb", 13, 1, errors.New("refusing to apply (requireReviewedPlan): not approved"), deployer.ReasonRefused, nil, refused))
			},
			outcomes: []string{Refused, Deployed}, runs: "1111111aaaa", verdict: "approved",
			check: func(t *testing.T, row Target) {
				a := row.Deploys[0].Approval
				if a.Ok || a.Says != "not approved: #13 has no standing approval by a user with write access" || a.Fix != "have a writer approve #13" {
					t.Errorf("refusal's approval: %+v", a)
				}
			},
		},
		{
			name: "an apply that failed runs, failing",
			feed: func(b *Board) {
				b.Finished(outcomeAt("3333333cccc", 0, 0, errors.New(`Get "https://10.0.0.1:6443/api": objects failed`), deployer.ReasonObjectsFailed, applied, nil))
			},
			outcomes: []string{Failed}, runs: "3333333cccc",
			check: func(t *testing.T, row Target) {
				if row.Runs.Outcome != "failure" {
					t.Errorf("runs %+v", row.Runs)
				}
				if m := row.Deploys[0].Message; strings.Contains(m, "10.0.0.1") || !strings.Contains(m, "objects failed") {
					t.Errorf("message %q: want the cluster's address scrubbed", m)
				}
			},
		},
		{
			name: "a render that failed is an error",
			feed: func(b *Board) {
				b.Finished(outcomeAt("4444444dddd", 0, 0, errors.New("kustomize: no"), deployer.ReasonRenderFailed, nil, nil))
			},
			outcomes: []string{Error},
		},
		{
			name: "Keep bounds the deploys, newest first",
			feed: func(b *Board) {
				for i, sha := range []string{"5555555aaaa", "5555555bbbb", "5555555cccc"} {
					b.Finished(outcomeAt(sha, 0, i, nil, "", applied, nil))
				}
			},
			outcomes: []string{Deployed, Deployed}, runs: "5555555cccc",
			check: func(t *testing.T, row Target) {
				if row.Deploys[0].SHA != "5555555cccc" || row.Deploys[1].SHA != "5555555bbbb" {
					t.Errorf("deploys %v", row.Deploys)
				}
			},
		},
		{
			name: "the cluster's record of the same commit keeps the verdict",
			feed: func(b *Board) {
				b.Finished(outcomeAt("1111111aaaa", 12, 0, nil, "", applied, approved))
				b.Runs(prod, deploy.State{SHA: "1111111aaaa", Outcome: "success", Time: t0})
			},
			outcomes: []string{Deployed}, runs: "1111111aaaa", verdict: "approved",
		},
		{
			name: "another commit in the cluster's record (another replica deployed it) has no verdict known",
			feed: func(b *Board) {
				b.Finished(outcomeAt("1111111aaaa", 12, 0, nil, "", applied, approved))
				b.Runs(prod, deploy.State{SHA: "9999999eeee", Outcome: "success", Time: t0})
			},
			outcomes: []string{Deployed}, runs: "9999999eeee",
		},
		{
			name: "what a target is doing",
			feed: func(b *Board) {
				b.Activity(prod, deployer.Queued, "commit 1111111 of #12 waits for a deploy slot")
			},
			outcomes: []string{},
			check: func(t *testing.T, row Target) {
				if row.State != "queued" || row.Since != t0.Add(time.Hour) {
					t.Errorf("state %q since %v", row.State, row.Since)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := board()
			b.Declare(prod)
			tc.feed(b)
			p := b.Page()
			if len(p.Targets) != 1 {
				t.Fatalf("targets %+v", p.Targets)
			}
			row := p.Targets[0]
			var outcomes []string
			for _, d := range row.Deploys {
				outcomes = append(outcomes, d.Outcome)
			}
			if strings.Join(outcomes, ",") != strings.Join(tc.outcomes, ",") {
				t.Errorf("outcomes %v, want %v", outcomes, tc.outcomes)
			}
			var runs, verdict string
			if row.Runs != nil {
				runs = row.Runs.SHA
				if row.Runs.Approval != nil {
					verdict = row.Runs.Approval.Verdict
				}
			}
			if runs != tc.runs || verdict != tc.verdict {
				t.Errorf("runs %q (verdict %q), want %q (%q)", runs, verdict, tc.runs, tc.verdict)
			}
			if tc.check != nil {
				tc.check(t, row)
			}
		})
	}
}

// Targets show by cluster and environment; a retired one goes; the
// queue lists what is not idle.
func TestBoardGroupsAndQueues(t *testing.T) {
	b := board()
	staging := target("staging", "staging", "")
	eu := target("prod-eu", "production", "/k/prod.yaml")
	eu.Context = "eu"
	gone := target("gone", "production", "/k/prod.yaml")
	b.Declare(prod, staging, eu, gone)
	// A branch whose targets file does not read: its stand-in.
	b.Finished(deployer.Outcome{Target: deployer.Target{Target: config.Target{Name: "o/r@main", Overlay: ".kplan.yaml", Environment: ".kplan.yaml"}, Repo: "o/r", Branch: "main"},
		SHA: "1111111aaaa", Err: errors.New("no .kplan.yaml"), Reason: deployer.ReasonTargetsInvalid})
	b.Retired(gone)
	b.Activity(staging, deployer.Deploying, "commit 1111111")
	b.Activity(eu, deployer.Waiting, "waiting on prod's failure")
	v := viewOf(b.Page())
	var got []string
	for _, c := range v.Clusters {
		for _, e := range c.Environments {
			for _, t := range e.Targets {
				got = append(got, c.Name+"/"+e.Name+"/"+t.Name)
			}
		}
	}
	want := "in-cluster/staging/staging prod.yaml/production/prod prod.yaml (eu)/production/prod-eu the targets of .kplan.yaml/.kplan.yaml/o/r@main"
	if strings.Join(got, " ") != want {
		t.Errorf("groups %q, want %q", strings.Join(got, " "), want)
	}
	var queue []string
	for _, q := range v.Queue {
		queue = append(queue, q.Target+":"+q.State)
	}
	if strings.Join(queue, " ") != "prod-eu:waiting staging:deploying" && strings.Join(queue, " ") != "staging:deploying prod-eu:waiting" {
		t.Errorf("queue %v", queue)
	}
}

// The HTML escapes what it shows (a message is anyone's text), hides
// Secret values in drift, and the JSON twin holds the same.
func TestHandlerServesHTMLAndJSON(t *testing.T) {
	b := board()
	b.Finished(outcomeAt("2222222bbbb", 13, 1, errors.New(`<script>alert(1)</script> refused`), deployer.ReasonRefused, nil, refused))
	b.Drift = func() []liveplan.DriftStatus {
		return []liveplan.DriftStatus{{Target: "prod", Repo: "o/r", Branch: "main", DeployedSHA: "1111111aaaa", Objects: 3, Checked: t0,
			Drifted: []liveplan.Row{
				{Key: "v1/Secret/hook/s", Action: liveplan.Configure, Drift: true, Fields: []inventorydiff.FieldChange{{Path: "data.password", Op: "~", Hidden: true}}},
				{Key: "v1/ConfigMap/hook/a", Action: liveplan.Configure, Drift: true, Fields: []inventorydiff.FieldChange{{Path: "data.v", Op: "~", Old: `"a"`, New: `"hand-edited"`}}},
			}}, {Target: "staging", Err: `dial tcp 10.1.2.3:443: connection refused`, Checked: t0}}
	}
	h := Handler{Board: b}
	get := func(path, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	html := get("/", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	body := html.Body.String()
	if ct := html.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := html.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt; refused", `<span class="badge not-ok">not-approved</span>`, "~ data.password (value hidden)",
		`~ data.v: &#34;a&#34; → &#34;hand-edited&#34;`, "dial tcp &lt;cluster&gt;: connection refused", `href="https://github.example/o/r/pull/13"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, never := range []string{"<script>", "10.1.2.3"} {
		if strings.Contains(body, never) {
			t.Errorf("the page shows %q", never)
		}
	}
	for _, tc := range []struct{ path, accept string }{{"/status.json", ""}, {"/", "application/json"}} {
		rec := get(tc.path, tc.accept)
		var p Page
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("GET %s (Accept %q): %v\n%s", tc.path, tc.accept, err, rec.Body)
		}
		if len(p.Targets) != 1 || p.Targets[0].Deploys[0].Outcome != Refused || len(p.Drift) != 2 || p.Drift[1].Err != "dial tcp <cluster>: connection refused" {
			t.Errorf("GET %s (Accept %q): %s", tc.path, tc.accept, rec.Body)
		}
	}
}

func TestWantsJSON(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                false,
		"*/*":                             false,
		"application/json":                true,
		"application/json; charset=utf-8": true,
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": false,
		"text/html, application/json":                                     false,
	} {
		if got := wantsJSON(accept); got != want {
			t.Errorf("wantsJSON(%q) = %v", accept, got)
		}
	}
}

// The deployers of several terms and shards feed one board while the
// page is served: under the race detector (RACE_PKGS), no field is
// shared unguarded, and no deploy is lost beyond Keep.
func TestBoardIsSharedSafely(t *testing.T) {
	b := board()
	b.Keep = 5
	b.Drift = func() []liveplan.DriftStatus { return nil }
	targets := []deployer.Target{target("a", "e", ""), target("b", "e", ""), target("c", "f", "/k")}
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Go(func() {
			for i := range 50 {
				b.Activity(tg, deployer.Deploying, fmt.Sprint("commit ", i))
				o := outcomeAt(fmt.Sprintf("%040d", i), i, i, nil, "", &deploy.Result{}, approved)
				o.Target = tg
				b.Finished(o)
				b.Runs(tg, deploy.State{SHA: o.SHA, Outcome: "success"})
				b.Activity(tg, deployer.Idle, "")
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			rec := httptest.NewRecorder()
			Handler{Board: b}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("HTTP %d", rec.Code)
			}
		}
	})
	wg.Wait()
	for _, row := range b.Page().Targets {
		if len(row.Deploys) != 5 || row.Deploys[0].SHA != fmt.Sprintf("%040d", 49) || row.State != "idle" {
			t.Errorf("%s: %d deploys, newest %s, state %s", row.Key, len(row.Deploys), row.Deploys[0].SHA, row.State)
		}
	}
}
