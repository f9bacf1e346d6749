package ghauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/test/githubapi"
)

const appID = 4242

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

// appKey is a test App's private key, generated once per run.
func appKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	keyOnce.Do(func() {
		var err error
		if testKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return testKey
}

func pemOf(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// fakeGitHub serves an App installed as 77 on octo/config and 78 on
// octo/other, whose tokens live ttl.
func fakeGitHub(t *testing.T, ttl time.Duration) *githubapi.Server {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddApp(githubapi.App{ID: appID, Key: &appKey(t).PublicKey, TokenTTL: ttl,
		Installations: map[int64][]string{77: {"octo/config"}, 78: {"octo/other"}}})
	return gh
}

func count(gh *githubapi.Server, method, suffix string) int {
	n := 0
	for _, r := range gh.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

// An App looks up each repository's installation once, mints a token the
// server accepts (after checking the JWT), reuses it, and mints a new one
// a minute before it expires, while the old one still works.
func TestAppMintsAndRefreshes(t *testing.T) {
	gh := fakeGitHub(t, 62*time.Second) // refreshed 60 s before expiry: within 2 s
	// The Enterprise form of the base URL: https://HOST/api/v3/.
	app, err := NewApp(appID, pemOf(appKey(t)), 0, gh.URL()+"/api/v3/", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tok1, err := app.Token(ctx, "octo/config")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok1, "ghs_") || !gh.ValidToken(tok1) {
		t.Fatalf("token %q is not one the server minted", tok1)
	}
	if tok, err := app.Token(ctx, "Octo/Config"); err != nil || tok != tok1 {
		t.Errorf("second call: %q, %v; want the same token", tok, err)
	}
	other, err := app.Token(ctx, "octo/other")
	if err != nil || other == tok1 {
		t.Errorf("another installation's token: %q, %v", other, err)
	}
	m := gh.Minted()
	if len(m) != 2 || m[0].Installation != 77 || m[1].Installation != 78 {
		t.Fatalf("minted %+v, want one token for 77 then one for 78", m)
	}
	if n := count(gh, "GET", "/installation"); n != 2 {
		t.Errorf("%d installation look-ups, want 2 (one per repository)", n)
	}

	deadline := time.Now().Add(5 * time.Second)
	tok2 := tok1
	for tok2 == tok1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if tok2, err = app.Token(ctx, "octo/config"); err != nil {
			t.Fatal(err)
		}
	}
	if tok2 == tok1 {
		t.Fatalf("the token was not refreshed before it expired (expires %s)", m[0].ExpiresAt)
	}
	if !gh.ValidToken(tok1) || !gh.ValidToken(tok2) {
		t.Errorf("refreshed too late: old token valid %v, new %v", gh.ValidToken(tok1), gh.ValidToken(tok2))
	}
	if n := count(gh, "GET", "/installation"); n != 2 {
		t.Errorf("the installation was looked up again (%d look-ups)", n)
	}
	if n := count(gh, "POST", "/app/installations/77/access_tokens"); n != 2 {
		t.Errorf("%d tokens minted for 77, want 2", n)
	}
	for _, r := range gh.Requests() {
		if r.Path == "/app/installations/77/access_tokens" && r.Status != http.StatusCreated {
			t.Errorf("mint answered %d", r.Status)
		}
	}
}

// Deliveries arriving together for a repository not seen yet share one
// installation look-up (the webhook's deploy and report calls race).
func TestConcurrentFirstCallsLookUpOnce(t *testing.T) {
	gh := fakeGitHub(t, time.Hour)
	app, err := NewApp(appID, pemOf(appKey(t)), 0, gh.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := app.Token(context.Background(), "octo/config"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := count(gh, "GET", "/installation"); n != 1 {
		t.Errorf("%d installation look-ups for 8 concurrent calls, want 1", n)
	}
}

// go-github through Transport acts as the App's installation for the
// repository of each request.
func TestTransportWithApp(t *testing.T) {
	gh := fakeGitHub(t, time.Hour)
	app, err := NewApp(appID, pemOf(appKey(t)), 0, gh.URL()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := github.NewClient(&http.Client{Transport: Transport(app, nil)})
	c.BaseURL = mustURL(t, gh.URL()+"/api/v3/")
	sha := strings.Repeat("a", 40)
	ctx := context.Background()
	if _, _, err := c.Repositories.CreateStatus(ctx, "octo", "config", sha, &github.RepoStatus{State: github.String("success"), Context: github.String("kplan/x")}); err != nil {
		t.Fatal(err)
	}
	st := gh.Statuses("octo", "config", sha)
	if len(st) != 1 || st[0].Creator.Login != "kplan[bot]" {
		t.Errorf("statuses %+v, want one by kplan[bot]", st)
	}
	// A repository the App is not installed on: the error says so.
	_, _, err = c.Repositories.CreateStatus(ctx, "octo", "elsewhere", sha, &github.RepoStatus{State: github.String("success")})
	if err == nil || !strings.Contains(err.Error(), "not installed on octo/elsewhere") {
		t.Errorf("uninstalled repository: %v", err)
	}
}

// With an installation ID nothing is looked up; a wrong key or App ID is
// refused by the server's JWT check, and the error shows no key.
func TestAppFixedInstallationAndRefusals(t *testing.T) {
	gh := fakeGitHub(t, time.Hour)
	ctx := context.Background()
	app, err := NewApp(appID, pemOf(appKey(t)), 78, gh.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := app.Token(ctx, "")
	if err != nil || !gh.ValidToken(tok) {
		t.Fatalf("fixed installation: %q, %v", tok, err)
	}
	if n := count(gh, "GET", "/installation"); n != 0 {
		t.Errorf("%d look-ups with a fixed installation", n)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pemOf(other)
	for _, tc := range []struct {
		name string
		id   int64
		key  []byte
		inst int64
		want string
	}{
		{"wrong key", appID, otherPEM, 77, "HTTP 401 (A JSON web token could not be decoded)"},
		{"wrong App ID", appID + 1, pemOf(appKey(t)), 77, "HTTP 401 (Integration not found)"},
		{"wrong key, looked up", appID, otherPEM, 0, "look up the installation for octo/config: HTTP 401"},
		{"unknown installation", appID, pemOf(appKey(t)), 99, "installation 99: HTTP 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewApp(tc.id, tc.key, tc.inst, gh.URL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Token(ctx, "octo/config")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), gh.URL()) {
				t.Errorf("the error shows the key or the API's address: %v", err)
			}
		})
	}
	if _, err := NewApp(appID, []byte("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n"), 0, gh.URL(), nil); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Errorf("a bad key: %v", err)
	}
}

// A token file is read again when it changes: rewritten in place, or
// swapped the way Kubernetes updates a mounted Secret (a symlink).
func TestTokenFileReread(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	for _, tok := range []string{"ghp_first", "ghp_second-longer", "ghp_third"} {
		gh.AddToken(tok, githubapi.Identity{Login: tok})
	}
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Kubernetes' layout: token -> ..data/token, ..data -> ..v1.
	os.MkdirAll(filepath.Join(dir, "..v1"), 0o755)
	os.WriteFile(filepath.Join(dir, "..v1", "token"), []byte("ghp_first\n"), 0o600)
	os.Symlink("..v1", filepath.Join(dir, "..data"))
	os.Symlink("..data/token", filepath.Join(dir, "token"))

	f, err := NewFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	c := github.NewClient(&http.Client{Transport: Transport(f, nil)})
	c.BaseURL = mustURL(t, gh.URL()+"/")
	ctx := context.Background()
	creator := func() string {
		t.Helper()
		sha := strings.Repeat("b", 40)
		if _, _, err := c.Repositories.CreateStatus(ctx, "octo", "config", sha, &github.RepoStatus{State: github.String("success")}); err != nil {
			t.Fatal(err)
		}
		st := gh.Statuses("octo", "config", sha)
		return st[len(st)-1].Creator.Login
	}
	if got := creator(); got != "ghp_first" {
		t.Errorf("first token: %s", got)
	}
	// Rewritten in place.
	write(filepath.Join("..v1", "token"), "ghp_second-longer\n")
	if got := creator(); got != "ghp_second-longer" {
		t.Errorf("after a rewrite: %s", got)
	}
	// Swapped atomically, as the kubelet does.
	os.MkdirAll(filepath.Join(dir, "..v2"), 0o755)
	write(filepath.Join("..v2", "token"), "ghp_third\n")
	os.Symlink("..v2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if got := creator(); got != "ghp_third" {
		t.Errorf("after a Secret update: %s", got)
	}
	// An emptied file is an error that names the file, not a token.
	write(filepath.Join("..v2", "token"), "")
	if _, err := f.Token(ctx, ""); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := NewFile(filepath.Join(dir, "nope")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// The environment picks one kind of credentials; conflicts and missing
// halves fail at start without showing a secret.
func TestFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	os.WriteFile(keyFile, pemOf(appKey(t)), 0o600)
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("ghp_file\n"), 0o600)
	key := string(pemOf(appKey(t)))
	for _, tc := range []struct {
		name string
		env  map[string]string
		kind string
		err  string
	}{
		{"nothing", nil, "no GitHub credentials", ""},
		{"token", map[string]string{"KPLAN_GITHUB_TOKEN": "ghp_x"}, "token", ""},
		{"token file", map[string]string{"KPLAN_GITHUB_TOKEN_FILE": tokenFile}, "token file", ""},
		{"app, key file", map[string]string{"KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY_FILE": keyFile}, "GitHub App", ""},
		{"app, key, installation", map[string]string{"KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY": key, "KPLAN_GITHUB_APP_INSTALLATION_ID": "77"}, "GitHub App installation", ""},
		{"token and file", map[string]string{"KPLAN_GITHUB_TOKEN": "ghp_x", "KPLAN_GITHUB_TOKEN_FILE": tokenFile}, "", "both KPLAN_GITHUB_TOKEN and KPLAN_GITHUB_TOKEN_FILE"},
		{"token and app", map[string]string{"KPLAN_GITHUB_TOKEN": "ghp_x", "KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY": key}, "", "set one"},
		{"app without key", map[string]string{"KPLAN_GITHUB_APP_ID": "4242"}, "", "without the App's private key"},
		{"key without app", map[string]string{"KPLAN_GITHUB_APP_PRIVATE_KEY": key}, "", "without KPLAN_GITHUB_APP_ID"},
		{"bad app id", map[string]string{"KPLAN_GITHUB_APP_ID": "my-app", "KPLAN_GITHUB_APP_PRIVATE_KEY": key}, "", "KPLAN_GITHUB_APP_ID is not a GitHub App ID"},
		{"bad installation", map[string]string{"KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY": key, "KPLAN_GITHUB_APP_INSTALLATION_ID": "x"}, "", "KPLAN_GITHUB_APP_INSTALLATION_ID is not"},
		{"both keys", map[string]string{"KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY": key, "KPLAN_GITHUB_APP_PRIVATE_KEY_FILE": keyFile}, "", "both KPLAN_GITHUB_APP_PRIVATE_KEY and KPLAN_GITHUB_APP_PRIVATE_KEY_FILE"},
		{"not a key", map[string]string{"KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY": "ghp_oops"}, "", "not PEM"},
		{"missing key file", map[string]string{"KPLAN_GITHUB_APP_ID": "4242", "KPLAN_GITHUB_APP_PRIVATE_KEY_FILE": filepath.Join(dir, "nope.pem")}, "", "KPLAN_GITHUB_APP_PRIVATE_KEY_FILE: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			auth, err := config.GitHubAuthFrom(getenv)
			var src Source
			if err == nil {
				src, err = New(auth, "https://ghe.example.com/api/v3/", nil)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "ghp_") {
					t.Errorf("the error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := Describe(src); got != tc.kind {
				t.Errorf("kind %q, want %q", got, tc.kind)
			}
		})
	}
}

func TestRepoOf(t *testing.T) {
	for in, want := range map[string]string{
		"/repos/octo/config/statuses/abc":       "octo/config",
		"/api/v3/repos/octo/config/deployments": "octo/config",
		"/app/installations/1/access_tokens":    "",
		"/repos/octo":                           "",
	} {
		if got := RepoOfPath(in); got != want {
			t.Errorf("RepoOfPath(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"https://github.com/octo/config.git":          "octo/config",
		"https://ghe.example.com/git/octo/config.git": "octo/config",
		"http://127.0.0.1:3000/octo/config":           "octo/config",
		"https://github.com/config.git":               "",
	} {
		if got := RepoOfCloneURL(in); got != want {
			t.Errorf("RepoOfCloneURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
