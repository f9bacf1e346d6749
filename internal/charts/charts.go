// Package charts is kplan's one owner of fetching Helm charts, for
// kustomize helmCharts (internal/render), Flux HelmReleases and Argo CD
// Helm sources (internal/helm) alike: from HTTP chart repositories
// (index.yaml, read by internal/chartindex) and OCI registries
// (go-containerregistry), only through the render network policy
// (internal/netpolicy), with the credentials of the standard places
// (Auth), kept in one cache by repository, name, version and digest,
// and unpacked by one untar (Files).
package charts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/kplan-dev/kplan/internal/netpolicy"
)

// DefaultMax bounds one fetched body when Options.Max does not.
const DefaultMax = 64 << 20

// Options say how a Fetcher fetches.
type Options struct {
	// Policy is the network policy every request holds to, redirects and
	// token requests included; nil fetches nothing.
	Policy *netpolicy.Policy
	// Dir keeps archives on disk under Dir/charts/ (the render cache's,
	// which the Action's cache restores); "" keeps them in memory only.
	Dir string
	// Max bounds one fetched body (an index, a manifest, an archive);
	// <= 0 is DefaultMax.
	Max int64
	// Auth is where credentials are found; nil fetches anonymously.
	Auth *Auth
}

// Fetcher fetches charts and keeps them: in memory for its life and,
// with Options.Dir, on disk. A chart version's content never changes, so
// a warm cache plans a chart bump without the network when the version
// is exact. It is safe for concurrent use; concurrent pulls of one chart
// fetch it once.
type Fetcher struct {
	policy *netpolicy.Policy
	dir    string
	max    int64
	auth   *Auth

	mu      sync.Mutex
	mem     map[string][]byte
	indexes map[string]*fetched // by index URL, for the Fetcher's life
	flight  singleflight.Group  // pulls in progress, by Ref
}

// fetched is one fetch, done once however many ask.
type fetched struct {
	once sync.Once
	data []byte
	err  error
}

// New returns a Fetcher with o.
func New(o Options) *Fetcher {
	f := &Fetcher{policy: o.Policy, dir: o.Dir, max: o.Max, auth: o.Auth}
	if f.max <= 0 {
		f.max = DefaultMax
	}
	return f
}

// Limit bounds one fetched body, and what is read from it.
func (f *Fetcher) Limit() int64 { return f.max }

// Ref names a chart.
type Ref struct {
	// Repo is where the chart is: an http(s) chart repository (its
	// index.yaml), or an OCI registry path, oci://host/path or host/path
	// without a scheme (as Argo CD names one), holding Name.
	Repo string
	// Name is the chart; "" when Repo names the chart's artifact itself
	// (a Flux OCIRepository's url).
	Name string
	// Version is a version or a semver range; "" is the newest release
	// (`helm pull` without --version).
	Version string
	// Devel takes pre-releases when Version is "" (`helm pull --devel`).
	Devel bool
	// Tag is an OCI tag taken as it is, not as a version (a Flux
	// OCIRepository's ref.tag, "latest" by default); it wins over
	// Version.
	Tag string
	// Digest pins an OCI artifact's manifest ("sha256:…"); it wins over
	// Tag and Version.
	Digest string
	// Insecure speaks plain http to an OCI registry on any host (Flux's
	// spec.insecure); loopback hosts always are, as Docker and
	// go-containerregistry treat them.
	Insecure bool
}

// String names the chart for messages.
func (r Ref) String() string {
	s := strings.TrimSuffix(r.Repo, "/")
	if r.Name != "" {
		s += "/" + r.Name
	}
	switch {
	case r.Digest != "":
		return s + "@" + r.Digest
	case r.Tag != "":
		return s + ":" + r.Tag
	case r.Version != "":
		return s + " " + r.Version
	}
	return s
}

// Chart is a pulled chart.
type Chart struct {
	Archive []byte // the packaged chart (.tgz)
	Version string // the version (or tag, or digest) picked
}

// Pull fetches the chart ref names: from an http(s) chart repository
// through its index, as `helm pull --repo` and source-controller's
// HelmChart pick a version; from an OCI registry as `helm pull
// oci://…` does (an exact version is the tag, a range the newest tag
// satisfying it). An exact version already in the cache is not fetched.
func (f *Fetcher) Pull(ctx context.Context, ref Ref) (*Chart, error) {
	v, err, _ := f.flight.Do(fmt.Sprintf("%#v", ref), func() (any, error) {
		switch {
		case strings.HasPrefix(ref.Repo, "https://"), strings.HasPrefix(ref.Repo, "http://"):
			return f.fromIndex(ctx, ref)
		case strings.HasPrefix(ref.Repo, "oci://"), !strings.Contains(ref.Repo, "://"):
			return f.fromRegistry(ctx, ref)
		}
		return nil, fmt.Errorf("repository %q is neither an http(s) Helm repository nor an OCI registry (oci://)", ref.Repo)
	})
	if err != nil {
		return nil, err
	}
	c := *v.(*Chart)
	return &c, nil
}

// errNoPolicy is a fetch by a Fetcher without a network policy.
var errNoPolicy = errors.New("refused")

// Refused reports whether err is a fetch the network policy refused (or
// one by a plan that fetches from no host): it fails alike on every run,
// whatever the network does.
func Refused(err error) bool {
	var refused *netpolicy.RefusedError
	return errors.As(err, &refused) || errors.Is(err, errNoPolicy)
}

// noPolicy is the error of a fetch of u without a policy.
func noPolicy(u string) error {
	return fmt.Errorf("fetch %s %w: this plan fetches from no host (hosts are listed with kplan's --remote-hosts, the Action's remote-hosts input or a webhook target's remoteHosts; never for a fork's pull request unless allowed)", u, errNoPolicy)
}

// key is the cache key of parts.
func key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cached returns the archive stored under k.
func (f *Fetcher) cached(k string) ([]byte, bool) {
	f.mu.Lock()
	data, ok := f.mem[k]
	f.mu.Unlock()
	if ok {
		return data, true
	}
	if f.dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(f.dir, "charts", k+".tgz"))
	if err != nil || int64(len(data)) > f.max {
		return nil, false
	}
	f.remember(k, data)
	return data, true
}

func (f *Fetcher) remember(k string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem == nil {
		f.mem = map[string][]byte{}
	}
	f.mem[k] = data
}

// store keeps data under k; a failure to write only costs a fetch.
func (f *Fetcher) store(k string, data []byte) {
	f.remember(k, data)
	if f.dir == "" {
		return
	}
	dir := filepath.Join(f.dir, "charts")
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(dir, k+".tgz")) != nil {
		os.Remove(tmp.Name())
	}
}

// digestOf is the sha256 of data, hex.
func digestOf(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// TooLargeError says a fetched body was over the Fetcher's limit.
type TooLargeError struct {
	URL   string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("fetch %s: the body is over the %d bytes a chart fetch may read", e.URL, e.Limit)
}
