package charts

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/kplan-dev/kplan/internal/netpolicy"
	"github.com/kplan-dev/kplan/internal/testchart"
)

const (
	demo     = "testdata/demo"
	user     = "deployer"
	password = "s3cret-never-printed"
)

func policy(t *testing.T, hosts ...string) *netpolicy.Policy {
	t.Helper()
	p, err := netpolicy.New(hosts, "--remote-hosts %s")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// chartVersion is the version in an archive's Chart.yaml.
func chartVersion(t *testing.T, tgz []byte) string {
	t.Helper()
	files, err := Files(tgz)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if v, ok := strings.CutPrefix(string(f.Data), "apiVersion: v2\nname: demo\nversion: "); ok && f.Name == "Chart.yaml" {
			return strings.TrimSpace(strings.SplitN(v, "\n", 2)[0])
		}
	}
	t.Fatal("no version in Chart.yaml")
	return ""
}

// repositoriesFile writes a repositories.yaml giving url user:pass.
func repositoriesFile(t *testing.T, url, pass string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "repositories.yaml")
	data := "repositories:\n- name: private\n  url: " + url + "/\n  username: " + user + "\n  password: " + pass + "\n"
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// registryConfig writes a Docker config.json giving host user:pass.
func registryConfig(t *testing.T, host, pass string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Charts from an HTTP chart repository, picked as helm pull picks them;
// one behind basic auth with the credentials of Helm's repositories.yaml,
// sent on every request to the repository's own scheme and host and on
// none to another (an archive the index lists elsewhere); without them,
// or with wrong ones, a 401 that says where credentials go and prints
// none; a host the policy refuses never asked.
func TestPullFromRepository(t *testing.T) {
	ctx := context.Background()
	open := testchart.ServeRepo(t)
	private := testchart.ServeRepoWith(t, testchart.RepoOptions{User: user, Password: password})
	elsewhere := testchart.ServeRepo(t)
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1"} {
		open.Add(t, testchart.Package(t, demo, v, v))
	}
	private.Add(t, testchart.Package(t, demo, "1.0.0", "1.0.0"))
	private.AddElsewhere(t, testchart.Package(t, demo, "1.1.0", "1.1.0"), elsewhere)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	for _, tc := range []struct {
		name    string
		repo    *testchart.Repo
		version string
		devel   bool
		auth    *Auth
		want    string // the version pulled, or
		err     string // what the error says
	}{
		{"exact", open, "1.0.0", false, nil, "1.0.0", ""},
		{"range", open, "~1.0 || ~1.1", false, nil, "1.1.0", ""},
		{"newest release", open, "", false, nil, "1.1.0", ""},
		{"devel", open, "", true, nil, "2.0.0-rc.1", ""},
		{"basic auth", private, "1.0.0", false, &Auth{RepositoryConfig: repositoriesFile(t, private.URL, password)}, "1.0.0", ""},
		{"archive elsewhere", private, "1.1.0", false, &Auth{RepositoryConfig: repositoriesFile(t, private.URL, password)}, "1.1.0", ""},
		{"no credentials", private, "1.0.0", false, &Auth{RepositoryConfig: filepath.Join(t.TempDir(), "none.yaml")}, "",
			"401 Unauthorized: kplan found no credentials for " + private.URL + ": add them to Helm's repositories file (`helm repo add NAME " + private.URL},
		{"wrong credentials", private, "1.0.0", false, &Auth{RepositoryConfig: repositoriesFile(t, private.URL, password+"-old")}, "",
			"401 Unauthorized: the credentials from Helm's repositories file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Options{Policy: policy(t, "127.0.0.1"), Auth: tc.auth})
			before := len(tc.repo.Authorizations())
			got, err := f.Pull(ctx, Ref{Repo: tc.repo.URL, Name: "demo", Version: tc.version, Devel: tc.devel})
			if tc.err != "" {
				var ae *AuthError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), password) {
					t.Fatalf("error %v, want an AuthError saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tc.want || chartVersion(t, got.Archive) != tc.want {
				t.Errorf("pulled %s, want %s", got.Version, tc.want)
			}
			if tc.auth == nil {
				return
			}
			for _, a := range tc.repo.Authorizations()[before:] {
				if a != basic {
					t.Errorf("the repository got Authorization %q, want its credentials", a)
				}
			}
		})
	}
	if auths := elsewhere.Authorizations(); len(auths) != 1 || auths[0] != "" {
		t.Errorf("the host of the archive the index lists elsewhere got Authorization %q, want one request without", auths)
	}

	t.Run("refused", func(t *testing.T) {
		f := New(Options{Policy: policy(t), Auth: &Auth{RepositoryConfig: repositoriesFile(t, private.URL, password)}})
		before := len(private.Authorizations())
		_, err := f.Pull(ctx, Ref{Repo: private.URL, Name: "demo", Version: "1.0.0"})
		if !Refused(err) || !strings.Contains(err.Error(), "--remote-hosts") {
			t.Errorf("error %v, want the policy's refusal", err)
		}
		if n := len(private.Authorizations()) - before; n != 0 {
			t.Errorf("the refused repository got %d requests", n)
		}
		_, err = New(Options{}).Pull(ctx, Ref{Repo: private.URL, Name: "demo", Version: "1.0.0"})
		if !Refused(err) {
			t.Errorf("without a policy: %v, want a refusal", err)
		}
	})
}

// Charts from an OCI registry, picked as `helm pull oci://…` picks them
// (an exact version is the tag, + pushed as _; a range the newest
// strict-version tag satisfying it; --devel), by a Flux OCIRepository's
// tag or digest; behind a token service, with the credentials of Helm's
// registry config or Docker's (DOCKER_CONFIG, go-containerregistry's
// keychain); without them a 401 naming `helm registry login`.
func TestPullFromRegistry(t *testing.T) {
	ctx := context.Background()
	open := testchart.ServeRegistry(t)
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0+build.7", "2.0.0-rc.1"} {
		open.Push(t, "charts", testchart.Package(t, demo, v, ""))
	}
	f := New(Options{Policy: policy(t, "127.0.0.1")})
	for _, tc := range []struct {
		name string
		ref  Ref
		want string
	}{
		{"exact", Ref{Version: "1.0.0"}, "1.0.0"},
		{"build metadata", Ref{Version: "1.2.0+build.7"}, "1.2.0+build.7"},
		{"range", Ref{Version: ">=1.0.0 <1.2.0"}, "1.1.0"},
		{"newest release", Ref{}, "1.2.0+build.7"},
		{"devel", Ref{Devel: true}, "2.0.0-rc.1"},
		{"tag", Ref{Tag: "1.1.0"}, "1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ref.Repo, tc.ref.Name = "oci://"+open.Host+"/charts", "demo"
			got, err := f.Pull(ctx, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tc.want || chartVersion(t, got.Archive) != tc.want {
				t.Errorf("pulled %s (Chart.yaml %s), want %s", got.Version, chartVersion(t, got.Archive), tc.want)
			}
		})
	}
	t.Run("digest, then from the cache", func(t *testing.T) {
		dir := t.TempDir()
		got, err := New(Options{Policy: policy(t, "127.0.0.1"), Dir: dir}).Pull(ctx, Ref{Repo: "oci://" + open.Host + "/charts/demo", Version: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		// Offline: the exact version, from the disk.
		again, err := New(Options{Dir: dir}).Pull(ctx, Ref{Repo: open.Host + "/charts/demo", Version: "1.0.0"})
		if err != nil || string(again.Archive) != string(got.Archive) {
			t.Fatalf("offline pull of a cached version: %v", err)
		}
	})

	guarded := testchart.ServeRegistryWith(t, testchart.RegistryOptions{User: user, Password: password})
	guarded.Push(t, "charts", testchart.Package(t, demo, "1.0.0", ""))
	ref := Ref{Repo: "oci://" + guarded.Host + "/charts", Name: "demo", Version: "1.0.0"}
	t.Run("Helm's registry config", func(t *testing.T) {
		got, err := New(Options{Policy: policy(t, "127.0.0.1"), Auth: &Auth{RegistryConfig: registryConfig(t, guarded.Host, password)}}).Pull(ctx, ref)
		if err != nil || got.Version != "1.0.0" {
			t.Fatalf("pull: %v", err)
		}
	})
	t.Run("Docker's config", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", filepath.Dir(registryConfig(t, guarded.Host, password)))
		t.Setenv("HOME", t.TempDir())
		got, err := New(Options{Policy: policy(t, "127.0.0.1"), Auth: &Auth{Docker: authn.DefaultKeychain}}).Pull(ctx, ref)
		if err != nil || got.Version != "1.0.0" {
			t.Fatalf("pull: %v", err)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		_, err := New(Options{Policy: policy(t, "127.0.0.1"), Auth: &Auth{}}).Pull(ctx, ref)
		var ae *AuthError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), "helm registry login "+guarded.Host) {
			t.Fatalf("error %v, want an AuthError naming helm registry login", err)
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		_, err := New(Options{Policy: policy(t, "127.0.0.1"), Auth: &Auth{RegistryConfig: registryConfig(t, guarded.Host, password+"-old")}}).Pull(ctx, ref)
		var ae *AuthError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), "the credentials from Helm's registry config") || strings.Contains(err.Error(), password) {
			t.Fatalf("error %v, want an AuthError naming where the credentials came from", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		before := len(guarded.Authorizations())
		_, err := New(Options{Policy: policy(t), Auth: &Auth{RegistryConfig: registryConfig(t, guarded.Host, password)}}).Pull(ctx, ref)
		if !Refused(err) {
			t.Errorf("error %v, want the policy's refusal", err)
		}
		if n := len(guarded.Authorizations()) - before; n != 0 {
			t.Errorf("the refused registry got %d requests", n)
		}
	})
}

// Plain http goes to loopback registries only, unless the source is
// marked insecure: a registry elsewhere is not asked over http.
func TestRegistryTransportHoldsToHTTPS(t *testing.T) {
	asked := 0
	base := roundTripper(func(*http.Request) (*http.Response, error) { asked++; return nil, errors.New("asked") })
	for _, tc := range []struct {
		url      string
		insecure bool
		want     bool // reaches the transport below
	}{
		{"http://registry.example.com/v2/", false, false},
		{"http://10.0.0.5:5000/v2/", false, false},
		{"http://registry.example.com/v2/", true, true},
		{"http://127.0.0.1:5000/v2/", false, true},
		{"http://localhost:5000/v2/", false, true},
		{"https://registry.example.com/v2/", false, true},
	} {
		asked = 0
		req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
		_, err := (&registryTransport{base: base, insecure: tc.insecure, max: 1}).RoundTrip(req)
		if got := asked == 1; got != tc.want {
			t.Errorf("%s (insecure %v): asked %v, want %v (%v)", tc.url, tc.insecure, got, tc.want, err)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Helm's repositories.yaml gives a repository its credentials by URL, a
// trailing slash aside; other repositories none.
func TestRepositoryCredentials(t *testing.T) {
	a := &Auth{RepositoryConfig: "testdata/repositories/basic.yaml"}
	for url, want := range map[string]string{
		"https://charts.example.com/stable":  "deployer",
		"https://charts.example.com/stable/": "deployer",
		"https://charts.example.com":         "",
		"https://charts.example.org":         "",
	} {
		c, err := a.Repository(url)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if c != nil {
			got = c.Username
		}
		if got != want {
			t.Errorf("%s: username %q, want %q", url, got, want)
		}
	}
	_, err := (&Auth{RepositoryConfig: "testdata/repositories/odd.yaml"}).Repository("https://x")
	if err == nil || strings.Contains(err.Error(), "not, a") {
		t.Errorf("odd file: %v, want an error quoting nothing of it", err)
	}
}

// The one untar: a chart's files, relative to its directory; an archive
// whose entry leaves the chart, or whose chart has no directory name, is
// refused.
func TestFiles(t *testing.T) {
	for name, want := range map[string]string{
		"demo-1.0.0.tgz": "",
		"escape.tgz":     "illegally references parent directory", // Helm's loader
		"dot.tgz":        "not a directory name",
	} {
		data, err := os.ReadFile(filepath.Join("testdata/archive", name))
		if err != nil {
			t.Fatal(err)
		}
		files, err := Files(data)
		chart := ""
		if err == nil {
			chart, err = Name(files)
		}
		switch {
		case want == "" && (err != nil || chart != "demo"):
			t.Errorf("%s: chart %q, %v", name, chart, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
}

// An HTTPS chart repository with its own CA (testchart's TLS server on
// loopback): Helm's repositories.yaml caFile makes kplan trust it, as
// insecure_skip_tls_verify does; without either, the pull fails on the
// certificate, as `helm pull` does.
func TestPullFromTLSRepository(t *testing.T) {
	ctx := context.Background()
	r := testchart.ServeRepoWith(t, testchart.RepoOptions{TLS: true})
	r.Add(t, testchart.Package(t, demo, "1.0.0", "1.0.0"))
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, r.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	file := func(entry string) *Auth {
		p := filepath.Join(t.TempDir(), "repositories.yaml")
		if err := os.WriteFile(p, []byte("repositories:\n- name: tls\n  url: "+r.URL+"\n"+entry), 0o600); err != nil {
			t.Fatal(err)
		}
		return &Auth{RepositoryConfig: p}
	}
	for _, tc := range []struct {
		name string
		auth *Auth
		err  string
	}{
		{"caFile", file("  caFile: " + ca + "\n"), ""},
		{"insecure_skip_tls_verify", file("  insecure_skip_tls_verify: true\n"), ""},
		{"neither", file(""), "certificate"},
		{"caFile missing", file("  caFile: " + filepath.Join(dir, "none.pem") + "\n"), "cannot read caFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Options{Policy: policy(t, "127.0.0.1"), Auth: tc.auth})
			got, err := f.Pull(ctx, Ref{Repo: r.URL, Name: "demo", Version: "1.0.0"})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != "1.0.0" {
				t.Errorf("pulled %s", got.Version)
			}
		})
	}
}
