// Package testchart serves Helm charts to tests on loopback: an HTTP
// chart repository (index.yaml and packaged charts) and an OCI registry
// (go-containerregistry's), charts packaged in the test from a chart
// directory in testdata.
package testchart

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	sigsyaml "sigs.k8s.io/yaml"
)

// Package packages the chart in dir at version, with its values'
// image.tag set to tag (unless ""), as `helm package` would.
func Package(t testing.TB, dir, version, tag string) []byte {
	t.Helper()
	data, err := PackageDir(dir, version, tag)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// PackageDir is Package for programs (the benchmarks).
func PackageDir(dir, version, tag string) ([]byte, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	ch.Metadata.Version = version
	if tag != "" {
		img, _ := ch.Values["image"].(map[string]any)
		if img == nil {
			return nil, fmt.Errorf("%s: no image in values", dir)
		}
		img["tag"] = tag
		data, err := sigsyaml.Marshal(ch.Values)
		if err != nil {
			return nil, err
		}
		for _, f := range ch.Raw {
			if f.Name == chartutil.ValuesfileName {
				f.Data = data
			}
		}
	}
	out, err := os.MkdirTemp("", "testchart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	p, err := chartutil.Save(ch, out)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Repo is an HTTP chart repository on loopback.
type Repo struct {
	URL string
	// CA is the certificate a TLS repository serves, PEM-encoded.
	CA []byte

	mu       sync.Mutex
	ix       *repo.IndexFile
	files    map[string][]byte
	redirect map[string]string // path -> URL answered 302
	user     string            // with password: Basic auth required
	password string
	Served   map[string]int // requests by path
	auth     []string       // each request's Authorization header, "" without
}

// RepoOptions say how a Repo serves.
type RepoOptions struct {
	// User and Password, when set, make every request without them
	// answered 401, as a private chart repository behind basic auth.
	User, Password string
	// TLS serves https with httptest's certificate (for 127.0.0.1);
	// Repo.CA is then its certificate, PEM-encoded.
	TLS bool
}

// ServeRepo starts an empty chart repository, closed with the test.
func ServeRepo(t testing.TB) *Repo {
	return ServeRepoWith(t, RepoOptions{})
}

// ServeRepoWith starts an empty chart repository with o, closed with
// the test.
func ServeRepoWith(t testing.TB, o RepoOptions) *Repo {
	r, stop := startRepo(o)
	t.Cleanup(stop)
	return r
}

// StartRepo is ServeRepo for programs (the benchmarks): stop closes it.
func StartRepo() (r *Repo, stop func()) { return startRepo(RepoOptions{}) }

func startRepo(o RepoOptions) (r *Repo, stop func()) {
	r = &Repo{ix: repo.NewIndexFile(), files: map[string][]byte{}, redirect: map[string]string{}, Served: map[string]int{},
		user: o.User, password: o.Password}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.Served[req.URL.Path]++
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		if r.user != "" {
			if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if to, ok := r.redirect[req.URL.Path]; ok {
			http.Redirect(w, req, to, http.StatusFound)
			return
		}
		if req.URL.Path == "/index.yaml" {
			data, err := sigsyaml.Marshal(r.ix)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.Write(data)
			return
		}
		data, ok := r.files[strings.TrimPrefix(req.URL.Path, "/")]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(data)
	}))
	if o.TLS {
		srv.StartTLS()
		r.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	} else {
		srv.Start()
	}
	r.URL = srv.URL
	return r, srv.Close
}

// Authorizations are the Authorization headers of the requests the
// repository got, in order ("" for a request without one).
func (r *Repo) Authorizations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.auth)
}

// Redirect answers a request for path (as "/demo-1.0.0.tgz") with a 302
// to url.
func (r *Repo) Redirect(path, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redirect[path] = url
}

// AddElsewhere publishes a packaged chart whose archive another
// repository serves: r's index lists it at the URL of at.
func (r *Repo) AddElsewhere(t testing.TB, tgz []byte, at *Repo) {
	t.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-%s.tgz", ch.Metadata.Name, ch.Metadata.Version)
	sum := sha256.Sum256(tgz)
	r.mu.Lock()
	err = r.ix.MustAdd(ch.Metadata, name, at.URL, hex.EncodeToString(sum[:]))
	r.ix.SortEntries()
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	at.mu.Lock()
	at.files[name] = tgz
	at.mu.Unlock()
}

// Add publishes a packaged chart.
func (r *Repo) Add(t testing.TB, tgz []byte) {
	t.Helper()
	if err := r.Publish(tgz); err != nil {
		t.Fatal(err)
	}
}

// Publish is Add for programs (the benchmarks).
func (r *Repo) Publish(tgz []byte) error {
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%s.tgz", ch.Metadata.Name, ch.Metadata.Version)
	sum := sha256.Sum256(tgz)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ix.MustAdd(ch.Metadata, name, r.URL, hex.EncodeToString(sum[:])); err != nil {
		return err
	}
	r.ix.SortEntries()
	r.files[name] = tgz
	return nil
}

// Count is how many requests path got.
func (r *Repo) Count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Served[path]
}

// Registry is an OCI registry on loopback (go-containerregistry's
// pkg/registry), plain http unless RegistryOptions.TLS.
type Registry struct {
	Host string // host:port
	// CertFile is the PEM of the server's certificate, with TLS: what a
	// client trusts it through (SSL_CERT_FILE).
	CertFile string

	h    http.Handler // the registry, for pushes in process
	mu   sync.Mutex
	auth []string // each request's Authorization header, "" without
}

// RegistryOptions say how a Registry serves.
type RegistryOptions struct {
	// TLS serves https with httptest's certificate (for 127.0.0.1),
	// written to CertFile.
	TLS bool
	// User and Password, when set, guard the registry with a token
	// service, as Docker Hub and most registries do: a request to /v2/
	// without a token is answered 401 with a Bearer challenge whose
	// realm is /token on the same host, which gives a token for Basic
	// User:Password (and nothing anonymous).
	User, Password string
}

// ServeRegistry starts an empty registry, closed with the test.
func ServeRegistry(t testing.TB) *Registry {
	return ServeRegistryWith(t, RegistryOptions{})
}

// ServeRegistryWith starts an empty registry with o, closed with the test.
func ServeRegistryWith(t testing.TB, o RegistryOptions) *Registry {
	g := &Registry{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	token := ""
	if o.User != "" {
		sum := sha256.Sum256([]byte(o.User + ":" + o.Password + ":token"))
		token = hex.EncodeToString(sum[:16])
	}
	var srv *httptest.Server
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		g.mu.Lock()
		g.auth = append(g.auth, req.Header.Get("Authorization"))
		g.mu.Unlock()
		if token == "" {
			g.h.ServeHTTP(w, req)
			return
		}
		if req.URL.Path == "/token" {
			if u, p, ok := req.BasicAuth(); !ok || u != o.User || p != o.Password {
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"wrong credentials"}]}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"token":%q}`, token)
			return
		}
		if req.Header.Get("Authorization") != "Bearer "+token {
			scope := ""
			if rest, ok := strings.CutPrefix(req.URL.Path, "/v2/"); ok {
				for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
					if i := strings.Index(rest, sep); i > 0 {
						scope = fmt.Sprintf(`,scope="repository:%s:pull"`, rest[:i])
					}
				}
			}
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="testchart"%s`, srv.URL, scope))
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		g.h.ServeHTTP(w, req)
	})
	if o.TLS {
		srv = httptest.NewTLSServer(handler)
		g.CertFile = filepath.Join(t.TempDir(), "registry.pem")
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := os.WriteFile(g.CertFile, cert, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		srv = httptest.NewServer(handler)
	}
	t.Cleanup(srv.Close)
	g.Host = srv.Listener.Addr().String()
	return g
}

// Authorizations are the Authorization headers of the requests the
// registry got, in order ("" for a request without one).
func (g *Registry) Authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.auth)
}

// Push pushes a packaged chart as helm push does: repo/name:version.
func (g *Registry) Push(t testing.TB, repoPath string, tgz []byte) {
	t.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(repoPath, "/") + "/" + ch.Metadata.Name
	config, err := json.Marshal(ch.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	cd := g.blob(t, name, config)
	ld := g.blob(t, name, tgz)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": cd, "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", "digest": ld, "size": len(tgz)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Helm pushes a version's + as _ (helm's pkg/registry/reference.go).
	tag := strings.ReplaceAll(ch.Metadata.Version, "+", "_")
	req := httptest.NewRequest(http.MethodPut, "/v2/"+name+"/manifests/"+tag, bytes.NewReader(manifest))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	g.do(t, req, http.StatusCreated)
}

func (g *Registry) blob(t testing.TB, name string, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	g.do(t, httptest.NewRequest(http.MethodPost, "/v2/"+name+"/blobs/uploads/?digest="+digest, bytes.NewReader(data)), http.StatusCreated)
	return digest
}

// do serves a push in process: a guarded registry's token service is
// for pulls.
func (g *Registry) do(t testing.TB, req *http.Request, want int) {
	t.Helper()
	rec := httptest.NewRecorder()
	g.h.ServeHTTP(rec, req)
	if rec.Code != want {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body.String())
	}
}

// CopyChart copies the chart directory src into dst (a repository's
// chart path), for charts read from a GitRepository.
func CopyChart(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}
