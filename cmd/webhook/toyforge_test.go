package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/markers"
	"github.com/kplan-dev/kplan/internal/testkit"
	"github.com/kplan-dev/kplan/test/githttp"
	"github.com/kplan-dev/kplan/test/gittest"
)

// toy is a third forge that exists only in this test: its deliveries
// carry X-Toy-Event and the secret in X-Toy-Token, and their body is
// {"repo", "ref", "sha"}; its repositories are fetched with the token
// KPLAN_TOY_TOKEN names, and its reports are recorded.
const toy = "toy"

type toyForge struct {
	token, secret string

	mu       sync.Mutex
	decoded  []forge.Event
	finished []deployer.Outcome
	fetched  []string // repositories a token was asked for
}

// toyRow is the row that adds the toy forge to the webhook: all it takes.
func toyRow(f *toyForge) forgeRow {
	return forgeRow{
		Forge: toy,
		Env:   [][2]string{{"KPLAN_TOY_TOKEN", "the toy forge's token"}},
		Bind: func(*pflag.FlagSet) newForgeClient {
			return func(env forgeEnv) (forgeClient, error) {
				f.token = env.Getenv("KPLAN_TOY_TOKEN")
				return f, nil
			}
		},
	}
}

func (f *toyForge) Route() forge.Route {
	return forge.Route{Forge: toy, Header: "X-Toy-Event", Receiver: toyReceiver{f}, Secret: []byte(f.secret)}
}

func (f *toyForge) ChangeRefs() (string, string) { return "refs/toy/%d/head", "refs/toy/%d/merge" }

func (f *toyForge) MaxCommentChars() int { return 1000 }

func (f *toyForge) Links(string) forge.Links { return forge.Links{} }

func (f *toyForge) Token(_ context.Context, repo string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, repo)
	return f.token, nil
}

func (f *toyForge) Started(context.Context, deployer.Target, string, int) {}

func (f *toyForge) Finished(_ context.Context, o deployer.Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = append(f.finished, o)
}

func (f *toyForge) Interrupted(context.Context, deployer.Target) (bool, error) { return false, nil }
func (f *toyForge) Flush(context.Context)                                      {}

func (f *toyForge) Pulls(context.Context, deployer.Target, []string) ([]approval.Pull, error) {
	return nil, nil
}

func (f *toyForge) ReviewedPlan(context.Context, deployer.Target, int) (*markers.Reviewed, error) {
	return nil, nil
}

func (f *toyForge) CanWrite(context.Context, deployer.Target, string) (bool, error) {
	return false, nil
}

func (f *toyForge) Upsert(context.Context, string, int, string, string) (forge.CommentResult, error) {
	return forge.CommentResult{}, nil
}

type toyReceiver struct{ f *toyForge }

func (toyReceiver) Delivery(h http.Header) (forge.Delivery, error) {
	d := forge.Delivery{Forge: toy, Event: h.Get("X-Toy-Event"), Credential: h.Get("X-Toy-Token")}
	if d.Credential == "" {
		return d, fmt.Errorf("no X-Toy-Token: %w", forge.ErrUnsigned)
	}
	return d, nil
}

func (toyReceiver) Verify(d forge.Delivery, body func(yield func([]byte)), secret []byte) bool {
	body(func([]byte) {})
	return subtle.ConstantTimeCompare([]byte(d.Credential), secret) == 1
}

func (r toyReceiver) Decode(d forge.Delivery, _ string, body []byte) (forge.Event, error) {
	var p struct{ Repo, Ref, SHA string }
	if err := json.Unmarshal(body, &p); err != nil {
		return forge.Event{}, &forge.DecodeError{Status: http.StatusBadRequest, Err: err}
	}
	ev := forge.Event{Kind: forge.Push, Repo: p.Repo, Ref: p.Ref, SHA: p.SHA}
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.decoded = append(r.f.decoded, ev)
	return ev, nil
}

func (toyReceiver) ForwardHeader(h string) bool { return strings.HasPrefix(h, "X-Toy-") }

// A forge added by a row of the table alone is served: its delivery,
// told apart by its own header and verified with its own secret, is
// received; its repository is fetched with its token; and the deploy's
// report lands in it, none in GitHub's.
func TestAThirdForgeIsOneRow(t *testing.T) {
	root, work := t.TempDir(), t.TempDir()
	gittest.Git(t, work, "init", "-q", "-b", "main")
	gittest.Write(t, work, map[string]string{
		"app/kustomization.yaml": "resources: [cm.yaml]\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {v: \"1\"}\n",
	})
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-q", "-m", "app")
	sha := gittest.Git(t, work, "rev-parse", "HEAD")
	gittest.Git(t, root, "clone", "-q", "--bare", work, "toy.git")
	git := githttp.Serve(t, root, "toy-token")

	cfg := filepath.Join(t.TempDir(), "webhook.yaml")
	// Nothing listens on port 1: GitHub's API and the target's cluster
	// fail at once, and the deploy reports its failure.
	if err := os.WriteFile(cfg, []byte("repositories:\n  - name: o/toy\n    cloneURL: "+git.URL+"/toy.git\n    branches:\n      - name: main\n        targets:\n          - {name: prod, overlay: app, kubeconfig: "+filepath.Join(t.TempDir(), "none")+"}\n"+
		"stateDir: "+t.TempDir()+"\ngitBaseURL: http://127.0.0.1:1\napiBaseURL: http://127.0.0.1:1/\nresyncInterval: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The configuration's parser knows the real forges only: the
	// repository moves to the toy forge once read.
	load := func(path string) (*config.Config, error) {
		c, err := config.Load(path)
		if err == nil {
			c.Repositories[0].Forge = toy
		}
		return c, err
	}
	f := &toyForge{secret: "toy-secret"}
	if help := environmentHelp(append(forgeTable(), toyRow(f))); !strings.Contains(help, "\n  KPLAN_TOY_TOKEN ") {
		t.Errorf("--help does not list the toy forge's environment:\n%s", help)
	}
	env := map[string]string{"KPLAN_WEBHOOK_SECRET": "s", "KPLAN_GITHUB_TOKEN": "t", "KPLAN_TOY_TOKEN": "toy-token"}
	line := serve(t, func(ctx context.Context, stdout io.Writer) error {
		return runWith(ctx, append(forgeTable(), toyRow(f)), load,
			[]string{"--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--drift-checks=false", "--live-plans=false"},
			func(k string) string { return env[k] }, stdout, io.Discard)
	})
	rest, ok := strings.CutPrefix(line, "kplan-webhook listening on ")
	if !ok {
		t.Fatalf("no listener URL in %q", line)
	}
	url := strings.Fields(rest)[0] + "/webhook"

	send := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"repo": "o/toy", "ref": "refs/heads/main", "sha": %q}`, sha)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Toy-Event", "push")
		req.Header.Set("X-Toy-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The webhook secret is GitHub's: it does not verify the toy forge's
	// deliveries.
	if code, body := send("s"); code != http.StatusUnauthorized {
		t.Errorf("a toy delivery signed with the webhook secret: HTTP %d %s, want 401", code, body)
	}
	if code, body := send("toy-secret"); code != http.StatusAccepted || !strings.Contains(body, "1 target(s) of o/toy@main") {
		t.Errorf("the toy delivery: HTTP %d %s, want 202 for o/toy's target", code, body)
	}
	// The overlay has no inventory: the deploy fails at its render, after
	// a fetch with the toy forge's token.
	testkit.Eventually(t, "the deploy's report in the toy forge", time.Minute, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, o := range f.finished {
			if o.SHA == sha && o.Target.Name == "prod" && o.Target.Forge == toy && o.Reason == deployer.ReasonRenderFailed {
				return true
			}
		}
		return false
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.decoded) != 1 || f.decoded[0].SHA != sha {
		t.Errorf("the toy receiver decoded %v, want the one verified delivery", f.decoded)
	}
	if len(f.fetched) == 0 || f.fetched[0] != "o/toy" {
		t.Errorf("tokens asked of the toy forge for %v, want o/toy", f.fetched)
	}
}
