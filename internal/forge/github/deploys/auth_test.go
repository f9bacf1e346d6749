package deploys

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/ghauth"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// reportCalls lists "METHOD path status" of the report requests GitHub
// answered (statuses, Deployments and their statuses, comments).
func reportCalls(gh *githubapi.Server) []string {
	var out []string
	for _, r := range gh.Requests() {
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			out = append(out, r.Method+" "+r.Path+" "+http.StatusText(r.Status))
		}
	}
	return out
}

// The webhook as a GitHub App whose installation token is revoked
// between the start of a deploy and its end: the commit status,
// Deployment status and PR comment are answered 401, the token is
// dropped, and they are re-sent with a freshly minted one. They used to be
// tried once and dropped.
func TestUnauthorizedReportIsResentWithFreshToken(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh.AddApp(githubapi.App{ID: 7, Key: &key.PublicKey, Installations: map[int64][]string{70: {"octo/cfg"}}})
	app, err := ghauth.NewApp(7, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0, gh.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	client := github.NewClient(&http.Client{Transport: ghauth.Transport(app, nil)})
	client.BaseURL, _ = url.Parse(gh.URL() + "/")
	r := NewReporter(client, slog.New(slog.DiscardHandler))
	r.Backoff = time.Millisecond
	ctx := context.Background()

	r.Started(ctx, prod, sha, 7)
	minted := gh.Minted()
	if len(minted) != 1 {
		t.Fatalf("%d tokens minted for the start, want 1", len(minted))
	}
	gh.Revoke(minted[0].Token)
	res := success()
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, PR: 7, Result: &res})

	if got := states(gh, sha, "kplan/prod"); got != "pending,success" {
		t.Errorf("statuses %s, want pending,success", got)
	}
	deps := gh.Deployments("octo", "cfg")
	if len(deps) != 1 || deploymentStates(gh, deps[0].ID) != "in_progress,success" {
		t.Errorf("deployments %+v", deps)
	}
	if cs := gh.Comments("octo", "cfg", 7); len(cs) != 1 || !strings.Contains(cs[0].Body, "succeeded") {
		t.Errorf("comments %+v", cs)
	}
	calls := reportCalls(gh)
	refused := 0
	for _, c := range calls {
		if strings.HasSuffix(c, http.StatusText(http.StatusUnauthorized)) {
			refused++
		}
	}
	if refused != 1 || len(gh.Minted()) != 2 || r.Held() != 0 {
		t.Errorf("%d reports answered 401, %d tokens minted, %d held; want the first 401 to mint a fresh token for it and the rest: %q",
			refused, len(gh.Minted()), r.Held(), calls)
	}
}

// With a token no one can refresh (KPLAN_GITHUB_TOKEN), a 401 keeps the
// report held, re-sent at each flush, until the token works again.
func TestUnauthorizedReportIsHeldUntilTheTokenWorks(t *testing.T) {
	gh := newServer(t)
	r := newReporter(gh)
	ctx := context.Background()
	r.Started(ctx, prod, sha, 0)
	gh.Revoke("tok")
	r.Finished(ctx, deployer.Outcome{Target: prod, SHA: sha, Result: &deployResult})
	if got := states(gh, sha, "kplan/prod"); got != "pending" || r.Held() == 0 {
		t.Fatalf("while the token is refused: statuses %s, %d held", got, r.Held())
	}
	gh.AddToken("tok", githubapi.Identity{Login: "kplan[bot]"}) // the operator fixed it
	r.Flush(ctx)
	if got := states(gh, sha, "kplan/prod"); got != "pending,success" || r.Held() != 0 {
		t.Errorf("after the flush: statuses %s, %d held", got, r.Held())
	}
}

var deployResult = success()
