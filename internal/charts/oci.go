package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of a Helm chart in an OCI registry (helm v3.22.0
// pkg/registry/constants.go), the first layer otherwise.
const (
	helmChartLayer    = types.MediaType("application/vnd.cncf.helm.chart.content.v1.tar+gzip")
	helmChartLayerOld = types.MediaType("application/tar+gzip")
)

// fromRegistry fetches the chart ref names from an OCI registry with
// go-containerregistry, as `helm pull oci://REPO/NAME --version V` picks
// it (helm v3.22.0 pkg/registry/client.go ValidateReference): a version
// semver parses is the tag (its + written _, as helm pushes it), a
// range the newest tag satisfying it (GetTagMatchingVersionOrConstraint
// over the tags that are strict versions), "" the newest release; a Tag
// is taken as it is, a Digest pins the manifest. The archive is checked
// against the layer's digest, and kept by digest, and by version when
// the tag is one.
func (f *Fetcher) fromRegistry(ctx context.Context, ref Ref) (*Chart, error) {
	p := strings.Trim(strings.TrimPrefix(ref.Repo, "oci://"), "/")
	if ref.Name != "" {
		p += "/" + ref.Name
	}
	host, _, ok := strings.Cut(p, "/")
	if !ok || host == "" {
		return nil, fmt.Errorf("OCI reference %q names no repository", ref.Repo)
	}
	var nopts []name.Option
	if ref.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	repo, err := name.NewRepository(p, append(nopts, name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("OCI reference %q: %w", p, err)
	}
	tag, exact := ociTag(ref)
	if ref.Digest != "" {
		if data, ok := f.cached(key("oci", p, ref.Digest)); ok {
			return &Chart{Archive: data, Version: cmpOr(ref.Tag, ref.Digest)}, nil
		}
	} else if exact {
		if data, ok := f.cached(key("oci", p, tag)); ok {
			return &Chart{Archive: data, Version: tag}, nil
		}
	}
	if f.policy == nil {
		return nil, noPolicy("oci://" + p)
	}
	ropts, err := f.remoteOptions(ctx, repo.Registry, ref.Insecure)
	if err != nil {
		return nil, err
	}
	var r name.Reference
	switch {
	case ref.Digest != "":
		r = repo.Digest(ref.Digest)
	case tag != "":
		r = repo.Tag(tag)
	default:
		tags, err := ropts.puller.List(ctx, repo)
		if err != nil {
			return nil, ropts.explain(err)
		}
		if tag, err = newestTag(tags, versionOrDevel(ref)); err != nil {
			return nil, fmt.Errorf("oci://%s: %w", p, err)
		}
		r = repo.Tag(tag)
	}
	desc, err := ropts.puller.Get(ctx, r)
	if err != nil {
		return nil, ropts.explain(err)
	}
	layer, err := chartLayer(desc.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	if layer.Size > f.max {
		return nil, &TooLargeError{URL: r.String(), Limit: f.max}
	}
	l, err := ropts.puller.Layer(ctx, repo.Digest(layer.Digest.String()))
	if err != nil {
		return nil, ropts.explain(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, ropts.explain(err)
	}
	tgz, err := io.ReadAll(io.LimitReader(rc, f.max+1))
	rc.Close()
	if err != nil {
		return nil, ropts.explain(err)
	}
	if int64(len(tgz)) > f.max {
		return nil, &TooLargeError{URL: r.String(), Limit: f.max}
	}
	if "sha256:"+digestOf(tgz) != layer.Digest.String() {
		return nil, fmt.Errorf("%s: the chart layer's digest is not %s", r, layer.Digest)
	}
	f.store(key("oci", p, desc.Digest.String()), tgz)
	version := cmpOr(ref.Tag, tag)
	if ref.Digest == "" && (exact || ref.Tag == "") {
		f.store(key("oci", p, tag), tgz)
	}
	if ref.Digest != "" {
		version = cmpOr(ref.Tag, ref.Digest)
	}
	return &Chart{Archive: tgz, Version: strings.ReplaceAll(version, "_", "+")}, nil
}

// ociTag is the tag ref names without listing tags, and whether it is
// an exact version, which never moves (a Tag, say "latest", may): ""
// when ref's Version is a range.
func ociTag(ref Ref) (tag string, exact bool) {
	if ref.Tag != "" {
		return ref.Tag, false
	}
	if ref.Version == "" {
		return "", false
	}
	if _, err := semver.NewVersion(ref.Version); err == nil {
		return strings.ReplaceAll(ref.Version, "+", "_"), true
	}
	return "", false
}

// versionOrDevel is the range a tag is picked with: ref's Version, ""
// the newest release, or any version with --devel (helm's cmd/helm/pull.go).
func versionOrDevel(ref Ref) string {
	if ref.Version == "" && ref.Devel {
		return ">0.0.0-0"
	}
	return ref.Version
}

// chartLayer is the chart's layer of a manifest.
func chartLayer(manifest []byte) (*v1.Descriptor, error) {
	m, err := v1.ParseManifest(bytes.NewReader(manifest))
	if err != nil {
		return nil, fmt.Errorf("read the manifest: %w", err)
	}
	for i, l := range m.Layers {
		if l.MediaType == helmChartLayer || l.MediaType == helmChartLayerOld {
			return &m.Layers[i], nil
		}
	}
	if len(m.Layers) > 0 {
		return &m.Layers[0], nil
	}
	return nil, errors.New("the manifest holds no chart layer")
}

// newestTag is the tag Helm picks among tags for version, a version or a
// range ("" any release): an exact match first, else the newest tag that
// is a strict version (its _ read as +) satisfying it (helm v3.22.0
// pkg/registry/client.go Tags, util.go GetTagMatchingVersionOrConstraint).
func newestTag(tags []string, version string) (string, error) {
	if version != "" && slices.Contains(tags, version) {
		return version, nil
	}
	c, err := semver.NewConstraint(cmpOr(version, "*"))
	if err != nil {
		return "", fmt.Errorf("version %q is not a semver range: %w", version, err)
	}
	var best *semver.Version
	pick := ""
	for _, t := range tags {
		v, err := semver.StrictNewVersion(strings.ReplaceAll(t, "_", "+"))
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, pick = v, t
		}
	}
	if pick == "" {
		return "", fmt.Errorf("no tag matches version %q", cmpOr(version, "*"))
	}
	return pick, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// registryOptions are go-containerregistry's puller for one registry,
// and where its credentials came from. The puller keeps the registry's
// token between the tag list, the manifest and the layer.
type registryOptions struct {
	puller   *remote.Puller
	registry string
	from     string // "" anonymous
}

// remoteOptions talk to reg through the network policy (every request,
// the token service's included, checked before it is sent), plain http
// only to loopback hosts or when insecure, one try (no retries: a plan
// fails fast and says why), bodies within the Fetcher's limit, with the
// credentials Auth has for reg. go-containerregistry's transport sends
// them to reg's host only (and to the token service reg's challenge
// names): pkg/v1/remote/transport/basic.go and bearer.go compare each
// request's host with the registry's.
func (f *Fetcher) remoteOptions(ctx context.Context, reg name.Registry, insecure bool) (*registryOptions, error) {
	au, from, err := f.auth.Registry(ctx, reg)
	if err != nil {
		return nil, err
	}
	t := &registryTransport{base: f.policy.Transport(), insecure: insecure, max: f.max}
	p, err := remote.NewPuller(
		remote.WithContext(ctx),
		remote.WithTransport(t),
		remote.WithAuth(au),
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithUserAgent("kplan"),
	)
	if err != nil {
		return nil, err
	}
	return &registryOptions{registry: reg.RegistryStr(), from: from, puller: p}, nil
}

// explain makes a registry's 401 or 403 an AuthError, which says where
// credentials come from.
func (o *registryOptions) explain(err error) error {
	var te *transport.Error
	if !errors.As(err, &te) || (te.StatusCode != http.StatusUnauthorized && te.StatusCode != http.StatusForbidden) {
		return err
	}
	e := &AuthError{URL: "oci://" + o.registry, Status: fmt.Sprintf("%d %s", te.StatusCode, http.StatusText(te.StatusCode)),
		From: o.from, Registry: o.registry}
	if te.Request != nil {
		e.URL = te.Request.URL.Scheme + "://" + te.Request.URL.Host + te.Request.URL.Path
	}
	if len(te.Errors) > 0 {
		e.Detail = te.Errors[0].String()
	}
	return e
}

// registryTransport holds a registry's requests to https, but for
// loopback hosts and registries marked insecure, and bounds their bodies.
type registryTransport struct {
	base     http.RoundTripper
	insecure bool
	max      int64
}

func (t *registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !t.insecure && !loopback(req.URL.Hostname()) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s://%s%s: plain http is spoken to loopback registries only (Flux's spec.insecure for others)", req.Method, req.URL.Scheme, req.URL.Host, req.URL.Path)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limited{rc: resp.Body, left: t.max, max: t.max, url: req.URL.Scheme + "://" + req.URL.Host + req.URL.Path}
	return resp, nil
}

// limited fails a read past its limit.
type limited struct {
	rc        io.ReadCloser
	left, max int64
	url       string
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, &TooLargeError{URL: l.url, Limit: l.max}
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, &TooLargeError{URL: l.url, Limit: l.max}
	}
	return n, err
}

func (l *limited) Close() error { return l.rc.Close() }

// loopback reports whether host is a loopback address or localhost.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
