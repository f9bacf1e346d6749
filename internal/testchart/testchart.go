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
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

	mu     sync.Mutex
	ix     *repo.IndexFile
	files  map[string][]byte
	Served map[string]int // requests by path
}

// ServeRepo starts an empty chart repository, closed with the test.
func ServeRepo(t testing.TB) *Repo {
	r, stop := StartRepo()
	t.Cleanup(stop)
	return r
}

// StartRepo is ServeRepo for programs (the benchmarks): stop closes it.
func StartRepo() (r *Repo, stop func()) {
	r = &Repo{ix: repo.NewIndexFile(), files: map[string][]byte{}, Served: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.Served[req.URL.Path]++
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
	r.URL = srv.URL
	return r, srv.Close
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

// Registry is an OCI registry on loopback (plain http).
type Registry struct {
	Host string // host:port
}

// ServeRegistry starts an empty registry, closed with the test.
func ServeRegistry(t testing.TB) *Registry {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://")}
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
	req, _ := http.NewRequest(http.MethodPut, "http://"+g.Host+"/v2/"+name+"/manifests/"+ch.Metadata.Version, bytes.NewReader(manifest))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	do(t, req, http.StatusCreated)
}

func (g *Registry) blob(t testing.TB, name string, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.Host+"/v2/"+name+"/blobs/uploads/?digest="+digest, bytes.NewReader(data))
	do(t, req, http.StatusCreated)
	return digest
}

func do(t testing.TB, req *http.Request, want int) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s %s", req.Method, req.URL, resp.Status, body)
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
