package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/chartindex"
	"github.com/kplan-dev/kplan/internal/netpolicy"
)

// Getter fetches through kplan's network policy (netpolicy.Policy): a
// GET with headers, any answer returned, a refused host an error saying
// which setting allows it.
type Getter interface {
	Get(ctx context.Context, url string, header http.Header, max int64) (*netpolicy.Response, error)
}

// UnavailableError says a release cannot be rendered offline, or under
// the network policy: its chart cannot be fetched, its source is not
// this repository, a values source is not in it. Flux would render it;
// kplan cannot know what it makes.
type UnavailableError struct {
	Release string // namespace/name
	Chart   string // the chart and where from, when known
	Reason  string
	Err     error
	Hint    string // what a user can do, if anything
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HelmRelease %s", e.Release)
	if e.Chart != "" {
		fmt.Fprintf(&b, ": chart %s", e.Chart)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, " (%s)", e.Hint)
	}
	return b.String()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Charts fetches chart archives through a Getter, and keeps them in
// memory for the process and, when Dir is set, on disk by repository
// URL, name, version and digest (the render cache's charts/ directory,
// which the Action's cache restores): a chart version's content never
// changes, so a warm cache plans a chart bump without the network when
// the version is exact.
type Charts struct {
	Get Getter // nil fetches nothing
	Dir string // "" keeps nothing on disk
	// Max bounds one fetched body; <= 0 is 64 MiB.
	Max int64

	mu      sync.Mutex
	mem     map[string][]byte
	indexes map[string]*fetched // by index URL, for the Charts' life
}

// fetched is one fetch, done once however many ask.
type fetched struct {
	once sync.Once
	data []byte
	err  error
}

// Limit bounds one fetched body, and what is read from it.
func (c *Charts) Limit() int64 { return c.max() }

func (c *Charts) max() int64 {
	if c.Max > 0 {
		return c.Max
	}
	return 64 << 20
}

func (c *Charts) key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cached returns the archive stored under key.
func (c *Charts) cached(key string) ([]byte, bool) {
	c.mu.Lock()
	data, ok := c.mem[key]
	c.mu.Unlock()
	if ok {
		return data, true
	}
	if c.Dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(c.Dir, "charts", key+".tgz"))
	if err != nil {
		return nil, false
	}
	c.remember(key, data)
	return data, true
}

func (c *Charts) remember(key string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		c.mem = map[string][]byte{}
	}
	c.mem[key] = data
}

// store keeps data under key; a failure to write only costs a fetch.
func (c *Charts) store(key string, data []byte) {
	c.remember(key, data)
	if c.Dir == "" {
		return
	}
	dir := filepath.Join(c.Dir, "charts")
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(dir, key+".tgz")) != nil {
		os.Remove(tmp.Name())
	}
}

func (c *Charts) get(ctx context.Context, u string, header http.Header) (*netpolicy.Response, error) {
	if c == nil || c.Get == nil {
		return nil, fmt.Errorf("fetch %s %w: this plan fetches from no host (hosts are listed with kplan's --remote-hosts, the Action's remote-hosts input or a webhook target's remoteHosts; never for a fork's pull request unless allowed)", u, errNoFetcher)
	}
	return c.Get.Get(ctx, u, header, c.max())
}

// errNoFetcher is a fetch by Charts that have no Getter.
var errNoFetcher = errors.New("refused")

// Refused reports whether err is a fetch the network policy refused (or
// a plan fetching from no host): it fails alike on every run, whatever
// the network does.
func Refused(err error) bool {
	var refused *netpolicy.RefusedError
	return errors.As(err, &refused) || errors.Is(err, errNoFetcher)
}

func (c *Charts) fetch(ctx context.Context, u string) ([]byte, error) {
	r, err := c.get(ctx, u, nil)
	if err != nil {
		return nil, err
	}
	if r.Status < 200 || r.Status > 299 {
		return nil, fmt.Errorf("fetch %s: %s", r.URL, r.StatusText)
	}
	return r.Body, nil
}

// fromIndex fetches chart name at version (a semver range, "" or "*" the
// newest release) from the HTTP chart repository at repoURL, as
// source-controller does: the index picks the version, the archive is
// checked against the index's digest. An exact version already cached
// needs no fetch.
func (c *Charts) fromIndex(ctx context.Context, repoURL, name, version string) ([]byte, string, error) {
	repoURL = strings.TrimSuffix(repoURL, "/")
	exact := ""
	if v, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err == nil {
		exact = v.String()
		if data, ok := c.cached(c.key("index", repoURL, name, exact)); ok {
			return data, exact, nil
		}
	}
	base, err := url.Parse(repoURL + "/")
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, "", fmt.Errorf("the repository URL %q is not http(s)", repoURL)
	}
	data, err := c.index(ctx, base.JoinPath("index.yaml").String())
	if err != nil {
		return nil, "", err
	}
	cv, err := pickVersion(data, name, version)
	if err != nil {
		return nil, "", err
	}
	key := c.key("index", repoURL, name, cv.Version)
	if got, ok := c.cached(key); ok && (cv.Digest == "" || digestOf(got) == cv.Digest) {
		return got, cv.Version, nil
	}
	if len(cv.URLs) == 0 {
		return nil, "", fmt.Errorf("the index lists no URL for %s %s", name, cv.Version)
	}
	ref, err := url.Parse(cv.URLs[0])
	if err != nil {
		return nil, "", fmt.Errorf("chart URL %q: %w", cv.URLs[0], err)
	}
	u := base.ResolveReference(ref).String()
	tgz, err := c.fetch(ctx, u)
	if err != nil {
		return nil, "", err
	}
	if cv.Digest != "" && digestOf(tgz) != cv.Digest {
		return nil, "", fmt.Errorf("%s: the archive's digest is not the index's (%s)", u, cv.Digest)
	}
	c.store(key, tgz)
	return tgz, cv.Version, nil
}

// index fetches a repository's index.yaml once for the Charts' life (a
// plan's): both sides of a plan, and every release or Application taking
// charts from the repository, pick versions from the same index.
func (c *Charts) index(ctx context.Context, u string) ([]byte, error) {
	c.mu.Lock()
	if c.indexes == nil {
		c.indexes = map[string]*fetched{}
	}
	f, ok := c.indexes[u]
	if !ok {
		f = &fetched{}
		c.indexes[u] = f
	}
	c.mu.Unlock()
	f.once.Do(func() { f.data, f.err = c.fetch(ctx, u) })
	return f.data, f.err
}

func digestOf(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// pickVersion is the index's entry for name that version (a version or
// semver range) picks, as source-controller's HelmChart does.
func pickVersion(data []byte, name, version string) (*chartindex.Entry, error) {
	ix, err := chartindex.Parse(data)
	if err != nil {
		return nil, err
	}
	return ix.Pick(name, version, false)
}

// Media types of a Helm chart in an OCI registry.
const (
	ociManifestType   = "application/vnd.oci.image.manifest.v1+json"
	helmChartLayer    = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	helmChartLayerOld = "application/tar+gzip"
)

// fromOCI fetches a chart from an OCI registry: ref is host[:port]/path
// (no scheme), tag a tag or semver range (the newest tag satisfying it),
// digest, if set, the manifest's. insecure talks plain http, as Flux's
// spec.insecure.
func (c *Charts) fromOCI(ctx context.Context, ref, tag, digest string, insecure bool) ([]byte, string, error) {
	host, repoPath, ok := strings.Cut(ref, "/")
	if !ok || host == "" || repoPath == "" {
		return nil, "", fmt.Errorf("OCI reference %q names no repository", ref)
	}
	scheme := "https"
	if insecure {
		scheme = "http"
	}
	reg := &registry{c: c, base: scheme + "://" + host, repo: repoPath}
	version := tag
	if digest == "" {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(tag, "v")); err != nil && tag != "latest" {
			// A range: the newest tag that satisfies it.
			tags, err := reg.tags(ctx)
			if err != nil {
				return nil, "", err
			}
			if version, err = newestTag(tags, tag); err != nil {
				return nil, "", err
			}
		}
		if data, ok := c.cached(c.key("oci", ref, version)); ok {
			return data, version, nil
		}
	} else if data, ok := c.cached(c.key("oci", ref, digest)); ok {
		return data, cmpOr(tag, digest), nil
	}
	manifestRef := cmpOr(digest, version)
	m, err := reg.manifest(ctx, manifestRef)
	if err != nil {
		return nil, "", err
	}
	var layer string
	for _, l := range m.Layers {
		if l.MediaType == helmChartLayer || l.MediaType == helmChartLayerOld {
			layer = l.Digest
			break
		}
	}
	if layer == "" && len(m.Layers) > 0 {
		layer = m.Layers[0].Digest
	}
	if layer == "" {
		return nil, "", fmt.Errorf("%s:%s holds no chart layer", ref, manifestRef)
	}
	tgz, err := reg.blob(ctx, layer)
	if err != nil {
		return nil, "", err
	}
	if "sha256:"+digestOf(tgz) != layer {
		return nil, "", fmt.Errorf("%s:%s: the chart layer's digest is not %s", ref, manifestRef, layer)
	}
	if digest != "" {
		c.store(c.key("oci", ref, digest), tgz)
	} else if version != "latest" {
		c.store(c.key("oci", ref, version), tgz)
	}
	return tgz, cmpOr(version, digest), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// newestTag is the newest of tags satisfying the semver constraint.
func newestTag(tags []string, constraint string) (string, error) {
	cons, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("version %q is not a semver range: %w", constraint, err)
	}
	var best *semver.Version
	var pick string
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !cons.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, pick = v, t
		}
	}
	if pick == "" {
		return "", fmt.Errorf("no tag matches version %q", constraint)
	}
	return pick, nil
}

// registry speaks the OCI distribution API's reads, anonymous: a 401's
// Bearer challenge is answered with an anonymous token.
type registry struct {
	c          *Charts
	base, repo string
	token      string
}

type ociManifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	} `json:"layers"`
}

func (r *registry) tags(ctx context.Context) ([]string, error) {
	data, err := r.get(ctx, "/tags/list", "application/json")
	if err != nil {
		return nil, err
	}
	var l struct {
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("read the registry's tag list: %w", err)
	}
	return l.Tags, nil
}

func (r *registry) manifest(ctx context.Context, ref string) (*ociManifest, error) {
	data, err := r.get(ctx, "/manifests/"+ref, ociManifestType)
	if err != nil {
		return nil, err
	}
	var m ociManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read the manifest of %s:%s: %w", r.repo, ref, err)
	}
	return &m, nil
}

func (r *registry) blob(ctx context.Context, digest string) ([]byte, error) {
	return r.get(ctx, "/blobs/"+digest, "*/*")
}

func (r *registry) get(ctx context.Context, p, accept string) ([]byte, error) {
	u := r.base + "/v2/" + r.repo + p
	for try := 0; ; try++ {
		h := http.Header{"Accept": {accept}}
		if r.token != "" {
			h.Set("Authorization", "Bearer "+r.token)
		}
		resp, err := r.c.get(ctx, u, h)
		if err != nil {
			return nil, err
		}
		if resp.Status == http.StatusUnauthorized && try == 0 {
			if err := r.login(ctx, resp.Header.Get("WWW-Authenticate")); err != nil {
				return nil, fmt.Errorf("fetch %s: %w", resp.URL, err)
			}
			continue
		}
		if resp.Status < 200 || resp.Status > 299 {
			return nil, fmt.Errorf("fetch %s: %s", resp.URL, resp.StatusText)
		}
		return resp.Body, nil
	}
}

// login gets an anonymous token from a Bearer challenge's realm.
func (r *registry) login(ctx context.Context, challenge string) error {
	scheme, params, _ := strings.Cut(challenge, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return errors.New("the registry asks for credentials; kplan pulls charts anonymously")
	}
	kv := map[string]string{}
	for _, part := range splitChallenge(params) {
		k, v, _ := strings.Cut(part, "=")
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.Trim(strings.TrimSpace(v), `"`)
	}
	realm, err := url.Parse(kv["realm"])
	if err != nil || kv["realm"] == "" {
		return errors.New("the registry's challenge names no token realm")
	}
	q := realm.Query()
	if s := kv["service"]; s != "" {
		q.Set("service", s)
	}
	q.Set("scope", cmpOr(kv["scope"], "repository:"+r.repo+":pull"))
	realm.RawQuery = q.Encode()
	data, err := r.c.fetch(ctx, realm.String())
	if err != nil {
		return err
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(data, &t); err != nil || cmpOr(t.Token, t.AccessToken) == "" {
		return errors.New("the registry's token service gave no token")
	}
	r.token = cmpOr(t.Token, t.AccessToken)
	return nil
}

// splitChallenge splits a challenge's parameters at commas outside quotes.
func splitChallenge(s string) []string {
	var out []string
	var cur bytes.Buffer
	quoted := false
	for _, ch := range s {
		switch {
		case ch == '"':
			quoted = !quoted
			cur.WriteRune(ch)
		case ch == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(ch)
		}
	}
	return append(out, cur.String())
}

// source is where a release's chart comes from.
type source struct {
	kind, ns, name string
	obj            map[string]any // the source object
}

func (s source) id() string { return s.kind + " " + s.ns + "/" + s.name }

func (s source) str(fields ...string) string {
	v, _, _ := unstructured.NestedString(s.obj, fields...)
	return v
}

func (s source) bool(fields ...string) bool {
	v, _, _ := unstructured.NestedBool(s.obj, fields...)
	return v
}

// cleanChartPath is a GitRepository chart path as a repository-relative
// directory; Flux joins it to the source's root securely.
func cleanChartPath(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}
