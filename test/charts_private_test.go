package test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/testchart"
	"github.com/kplan-dev/kplan/internal/testhelm"
	"github.com/kplan-dev/kplan/test/gittest"
)

// chartsUser and chartsPassword guard the private chart sources of these
// tests; the password must never be printed.
const (
	chartsUser     = "deployer"
	chartsPassword = "pa55-w0rd-never-printed"
)

// chartEnv is a process environment of its own for kplan and helm: a
// home without credentials, plus extra ("K=V").
func chartEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
		"GOCOVERDIR=" + os.Getenv("GOCOVERDIR")}
	return append(env, extra...)
}

// dockerConfig writes a Docker config.json (the shape of `docker login`'s
// and `helm registry login`'s) giving user:password for host.
func dockerConfig(t *testing.T, host, user, password string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// chartsRepo is a git repository whose overlay app inflates chart demo
// from repo at version 1.0.0 on main~1 and 2.0.0 on main.
func chartsRepo(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	kust := func(version string) map[string]string {
		return map[string]string{"app/kustomization.yaml": "helmCharts:\n- name: demo\n  repo: " + repo + "\n  version: " + version +
			"\n  releaseName: web\n  namespace: web\n  valuesInline:\n    replicas: 2\n"}
	}
	gittest.Write(t, dir, kust("1.0.0"))
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "commit", "-qm", "demo 1.0.0")
	gittest.Write(t, dir, kust("2.0.0"))
	gittest.Git(t, dir, "commit", "-qam", "demo 2.0.0")
	return dir
}

// runCharts runs a command in env and returns its stdout and stderr,
// failing the test when it fails unless fail is set; neither may hold
// the password.
func runCharts(t *testing.T, env []string, dir string, fail bool, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && !fail {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	if err == nil && fail {
		t.Fatalf("%s %s succeeds, want it to fail:\n%s", filepath.Base(name), strings.Join(args, " "), stdout.String())
	}
	for _, secret := range []string{chartsPassword, base64.StdEncoding.EncodeToString([]byte(chartsUser + ":" + chartsPassword))} {
		if strings.Contains(stdout.String(), secret) || strings.Contains(stderr.String(), secret) {
			t.Errorf("%s %s prints the password:\n%s\n%s", filepath.Base(name), strings.Join(args, " "), stdout.String(), stderr.String())
		}
	}
	return stdout.String(), stderr.String()
}

// The image change a chart bump from 1.0.0 to 2.0.0 plans, in
// kplan diff's text.
const demoBump = "ghcr.io/example/demo:1.0.0"

// A kustomize helmCharts chart from an OCI registry (repo: oci://…), as
// `kustomize build --enable-helm` pulls it (`helm pull oci://REPO/NAME
// --version V --untar`, kustomize's
// api/internal/builtins/HelmChartInflationGenerator.go pullCommand,
// v0.21.2): kplan render gives what kustomize build gives with the same
// helm, and kplan diff plans the chart bump; then the same registry
// behind a token service, with the credentials `helm registry login`
// writes (HELM_REGISTRY_CONFIG) or `docker login` writes (DOCKER_CONFIG),
// and without credentials a failure that says how to log in.
func TestKustomizeHelmChartsFromOCIRegistry(t *testing.T) {
	t.Parallel()
	kplan := buildKplan(t)
	bin := testhelm.Dir(t)
	const chartDir = "../testdata/flux-helm/charts/demo"
	for _, tc := range []struct {
		name string
		auth bool
	}{{"anonymous", false}, {"registry token", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := testchart.RegistryOptions{TLS: true}
			if tc.auth {
				o.User, o.Password = chartsUser, chartsPassword
			}
			reg := testchart.ServeRegistryWith(t, o)
			reg.Push(t, "charts", testchart.Package(t, chartDir, "1.0.0", "1.0.0"))
			reg.Push(t, "charts", testchart.Package(t, chartDir, "2.0.0", "2.0.0"))
			dir := chartsRepo(t, "oci://"+reg.Host+"/charts")
			helmFlags := []string{"--enable-helm", "--helm-command", filepath.Join(bin, "helm"), "--remote-hosts", "127.0.0.1"}
			var env []string
			if tc.auth {
				env = chartEnv(t, "SSL_CERT_FILE="+reg.CertFile, "HELM_REGISTRY_CONFIG="+dockerConfig(t, reg.Host, chartsUser, chartsPassword))
			} else {
				env = chartEnv(t, "SSL_CERT_FILE="+reg.CertFile)
			}

			// kustomize build --enable-helm, the oracle, pulls with the
			// same helm and the same credentials.
			want, _ := runCharts(t, env, dir, false, filepath.Join(bin, "kustomize"), "build", "--enable-helm", "--helm-command", filepath.Join(bin, "helm"), "app")
			os.RemoveAll(filepath.Join(dir, "app", "charts")) // helm pull --untar's, left in the work tree
			got, _ := runCharts(t, env, dir, false, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
			if got != want || !strings.Contains(got, "ghcr.io/example/demo:2.0.0") {
				t.Errorf("kplan render gives\n%s\nkustomize build --enable-helm gives\n%s", got, want)
			}
			out, _ := runCharts(t, env, dir, false, kplan, append([]string{"diff", "--base", "main~1", "--head", "main"}, helmFlags...)...)
			if !strings.Contains(out, demoBump) || !strings.Contains(out, "ghcr.io/example/demo:2.0.0") {
				t.Errorf("kplan diff does not plan the image change of the chart bump:\n%s", out)
			}
			if !tc.auth {
				return
			}
			// docker login's file, through go-containerregistry's keychain.
			env = chartEnv(t, "SSL_CERT_FILE="+reg.CertFile, "DOCKER_CONFIG="+filepath.Dir(dockerConfig(t, reg.Host, chartsUser, chartsPassword)))
			got, _ = runCharts(t, env, dir, false, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
			if got != want {
				t.Errorf("with DOCKER_CONFIG kplan render gives\n%s\nwant\n%s", got, want)
			}
			// No credentials: the render fails, saying how to give them.
			_, stderr := runCharts(t, chartEnv(t, "SSL_CERT_FILE="+reg.CertFile), dir, true, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
			if !strings.Contains(stderr, "helm registry login "+reg.Host) {
				t.Errorf("without credentials kplan render says\n%s\nwant it to name `helm registry login %s`", stderr, reg.Host)
			}
			// Wrong ones: refused, never printed.
			env = chartEnv(t, "SSL_CERT_FILE="+reg.CertFile, "HELM_REGISTRY_CONFIG="+dockerConfig(t, reg.Host, chartsUser, chartsPassword+"-old"))
			runCharts(t, env, dir, true, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
		})
	}
}

// A kustomize helmCharts chart from an HTTP chart repository behind
// basic auth, with the username and password of Helm's repositories.yaml
// (HELM_REPOSITORY_CONFIG, as `helm repo add --username --password`
// writes it): rendered and planned; the credentials go to the
// repository's own host only: an archive the index lists on another
// host (another port is another host, as Helm's getter compares them,
// pkg/getter/httpgetter.go) and a redirect there get none, a host the
// network policy refuses is never contacted, and the password is printed
// nowhere.
func TestKustomizeHelmChartsFromPrivateRepository(t *testing.T) {
	t.Parallel()
	kplan := buildKplan(t)
	bin := testhelm.Dir(t)
	const chartDir = "../testdata/flux-helm/charts/demo"
	repo := testchart.ServeRepoWith(t, testchart.RepoOptions{User: chartsUser, Password: chartsPassword})
	elsewhere := testchart.ServeRepo(t) // 127.0.0.1, another port
	refused := testchart.ServeRepo(t)   // reached as localhost, which the policy does not list
	v1 := testchart.Package(t, chartDir, "1.0.0", "1.0.0")
	repo.Add(t, v1)
	repo.AddElsewhere(t, testchart.Package(t, chartDir, "2.0.0", "2.0.0"), elsewhere)
	dir := chartsRepo(t, repo.URL)
	repoConfig := filepath.Join(t.TempDir(), "repositories.yaml")
	write := func(password string) {
		data := "apiVersion: \"\"\ngenerated: \"0001-01-01T00:00:00Z\"\nrepositories:\n- name: private\n  url: " + repo.URL +
			"\n  username: " + chartsUser + "\n  password: " + password + "\n"
		if err := os.WriteFile(repoConfig, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(chartsPassword)
	env := chartEnv(t, "HELM_REPOSITORY_CONFIG="+repoConfig)
	helmFlags := []string{"--enable-helm", "--helm-command", filepath.Join(bin, "helm"), "--remote-hosts", "127.0.0.1"}

	out, _ := runCharts(t, env, dir, false, kplan, append([]string{"diff", "--base", "main~1", "--head", "main"}, helmFlags...)...)
	if !strings.Contains(out, demoBump) || !strings.Contains(out, "ghcr.io/example/demo:2.0.0") {
		t.Errorf("kplan diff does not plan the image change of the chart bump:\n%s", out)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(chartsUser+":"+chartsPassword))
	for _, a := range repo.Authorizations() {
		if a != basic {
			t.Errorf("the repository got Authorization %q, want its credentials on every request", a)
		}
	}
	if auths := elsewhere.Authorizations(); len(auths) == 0 || strings.Join(auths, "") != "" {
		t.Errorf("the host the index names for 2.0.0 got Authorization %q, want requests without credentials", auths)
	}

	// The archive of 1.0.0 redirected to another host: no credentials
	// follow the redirect; a host the policy refuses is never asked.
	t.Run("redirects", func(t *testing.T) {
		elsewhere.Add(t, v1)
		refused.Add(t, v1)
		before := len(elsewhere.Authorizations())
		repo.Redirect("/demo-1.0.0.tgz", elsewhere.URL+"/demo-1.0.0.tgz")
		// kplan render reads the work tree: back to 1.0.0 there.
		gittest.Git(t, dir, "checkout", "-q", "main~1", "--", "app")
		defer gittest.Git(t, dir, "checkout", "-q", "main", "--", "app")
		got, _ := runCharts(t, env, dir, false, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
		if !strings.Contains(got, "ghcr.io/example/demo:1.0.0") {
			t.Errorf("kplan render of demo 1.0.0 gives\n%s", got)
		}
		if auths := elsewhere.Authorizations()[before:]; len(auths) != 1 || auths[0] != "" {
			t.Errorf("after a redirect the other host got Authorization %q, want one request without", auths)
		}
		repo.Redirect("/demo-1.0.0.tgz", strings.Replace(refused.URL, "127.0.0.1", "localhost", 1)+"/demo-1.0.0.tgz")
		_, stderr := runCharts(t, env, dir, true, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
		if n := len(refused.Authorizations()); n != 0 || !strings.Contains(stderr, "refused") {
			t.Errorf("a redirect to a host the policy refuses: %d requests reached it; kplan says\n%s", n, stderr)
		}
	})
	// Wrong credentials: a 401, the password printed nowhere.
	t.Run("wrong password", func(t *testing.T) {
		write(chartsPassword + "-old")
		defer write(chartsPassword)
		_, stderr := runCharts(t, env, dir, true, kplan, append([]string{"render"}, append(helmFlags, "app")...)...)
		if !strings.Contains(stderr, "401") {
			t.Errorf("kplan render with a wrong password says\n%s\nwant the 401", stderr)
		}
	})
}
