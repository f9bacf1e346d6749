// Package netpolicy says which hosts a render may fetch from, and fetches
// through an HTTP client that holds to it at connect time.
//
// A kustomization can name http(s) URLs as resources, patches, generator
// sources and so on, and kustomize fetches them from the machine that
// renders: the Action's runner or the webhook's pod. A pull request is
// untrusted input, so a render fetches only from hosts its operator
// listed. Loopback, private, link-local, shared and other special-purpose
// addresses (the cloud metadata service at 169.254.169.254 or
// fd00:ec2::254 among them) are refused even for a listed host unless the
// host is named exactly (not through a wildcard), and the check is made
// on the address the connection is made to, after DNS, so a name that
// resolves to a public address when checked and a private one when used
// cannot pass. Redirects are held to the same rules.
package netpolicy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// metadataNames are the host names of cloud metadata services. They
// resolve to special addresses anyway; naming them here refuses them
// before any lookup, even under a wildcard.
var metadataNames = []string{
	"metadata", "metadata.google.internal", "metadata.goog",
	"instance-data", "instance-data.ec2.internal", "metadata.azure.internal",
	"metadata.oraclecloud.com", "metadata.tencentyun.com",
}

// Policy is the list of hosts renders may fetch from. The zero Policy
// (and a nil one) allows nothing.
type Policy struct {
	exact    map[string]bool // host names and IP literals named exactly, lowercase
	suffixes []string        // from "*.example.com": ".example.com"
	any      bool            // "*": any host with a public address
	// Allow says how a user allows a host, with %s for it: "--remote-hosts %s".
	allow string

	guard  *ssrf.Guardian
	client *http.Client
}

// New returns the policy that allows hosts: exact host names or IP
// literals ("charts.example.com", "10.0.0.5", "[fd00::1]"), "*.example.com"
// for any subdomain of example.com, or "*" for any host. Only exact names
// reach special-purpose addresses. allow says how a user names a host in
// the setting these come from, with %s for the host ("--remote-hosts %s"),
// for the message of a refused fetch.
func New(hosts []string, allow string) (*Policy, error) {
	p := &Policy{exact: map[string]bool{}, allow: allow}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "":
			continue
		case h == "*":
			p.any = true
		case strings.HasPrefix(h, "*."):
			if err := validHost(h[2:]); err != nil {
				return nil, fmt.Errorf("remote host %q: %w", h, err)
			}
			p.suffixes = append(p.suffixes, h[1:])
		default:
			h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
			if err := validHost(h); err != nil {
				return nil, fmt.Errorf("remote host %q: %w", h, err)
			}
			p.exact[canonical(h)] = true
		}
	}
	// Any port: a listed host may serve on any; the address is what
	// matters. tcp only.
	p.guard = ssrf.New(ssrf.WithAnyPort())
	p.client = p.newClient()
	return p, nil
}

func validHost(h string) error {
	if h == "" {
		return errors.New("empty host name")
	}
	if strings.ContainsAny(h, "/:?#@ *") && !isIP(h) {
		return errors.New("want a host name or an IP address, without scheme, port or path")
	}
	return nil
}

func isIP(h string) bool {
	_, err := netip.ParseAddr(h)
	return err == nil
}

// canonical spells an IP literal one way (::ffff:a.b.c.d and a.b.c.d are
// different hosts to a URL, but one address).
func canonical(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return strings.TrimSuffix(h, ".")
}

// Hosts says whether the policy allows any host at all.
func (p *Policy) Hosts() bool {
	return p != nil && (p.any || len(p.exact) > 0 || len(p.suffixes) > 0)
}

// Names lists the hosts the policy allows as New was given them, in
// canonical form and sorted ("*", "*.example.com", "charts.example.com"):
// the setting a plan records, for a deploy to compare with its own.
func (p *Policy) Names() []string {
	if p == nil {
		return nil
	}
	var n []string
	if p.any {
		n = append(n, "*")
	}
	for _, s := range p.suffixes {
		n = append(n, "*"+s)
	}
	n = append(n, slices.Collect(maps.Keys(p.exact))...)
	slices.Sort(n)
	return slices.Compact(n)
}

// Fingerprint is the policy as the shards of one plan must share it: the
// hosts it allows (plan.Options.Fingerprint).
func (p *Policy) Fingerprint() string { return strings.Join(p.Names(), ",") }

// Allowed says whether host may be fetched from, and whether it is named
// exactly (and so may reach special-purpose addresses).
func (p *Policy) Allowed(host string) (ok, exact bool) {
	if p == nil {
		return false, false
	}
	host = canonical(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")))
	if p.exact[host] {
		return true, true
	}
	for _, m := range metadataNames {
		if host == m {
			return false, false
		}
	}
	if p.any {
		return true, false
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true, false
		}
	}
	return false, false
}

// RefusedError says a fetch was refused by the policy.
type RefusedError struct {
	URL    string
	Host   string
	Addr   string // the address refused, when the host was allowed
	Reason string
	allow  string
}

func (e *RefusedError) Error() string {
	how := "no setting allows it"
	if e.allow != "" {
		how = "allow it with " + fmt.Sprintf(e.allow, e.Host)
	}
	if e.Addr != "" {
		return fmt.Sprintf("fetch %s refused: %s resolves to %s, %s; only a host named exactly may reach such an address (%s)", e.URL, e.Host, e.Addr, e.Reason, how)
	}
	return fmt.Sprintf("fetch %s refused: %s (%s)", e.URL, e.Reason, how)
}

// Check refuses a URL the policy does not allow, before any connection.
func (p *Policy) Check(u *url.URL) error {
	ref := Redact(u)
	if u.Scheme != "http" && u.Scheme != "https" {
		return p.refused(ref, u.Hostname(), "", fmt.Sprintf("scheme %q is not http(s)", u.Scheme))
	}
	host := u.Hostname()
	if host == "" {
		return p.refused(ref, host, "", "the URL names no host")
	}
	if ok, _ := p.Allowed(host); !ok {
		if !p.Hosts() {
			return p.refused(ref, host, "", "renders fetch from no host unless hosts are listed")
		}
		return p.refused(ref, host, "", fmt.Sprintf("host %s is not among the hosts renders may fetch from", host))
	}
	return nil
}

func (p *Policy) refused(ref, host, addr, reason string) *RefusedError {
	e := &RefusedError{URL: ref, Host: host, Addr: addr, Reason: reason}
	if p != nil {
		e.allow = p.allow
	}
	return e
}

// Redact drops a URL's user information, which may hold a password.
func Redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// Limits of one fetch.
const (
	dialTimeout   = 10 * time.Second
	headerTimeout = 30 * time.Second
	maxRedirects  = 10
)

func (p *Policy) newClient() *http.Client {
	tr := &http.Transport{
		// No proxy from the environment: through a proxy, the address
		// connected to would be the proxy's, and nothing could be
		// checked.
		Proxy:                 nil,
		DialContext:           p.dialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: headerTimeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("fetch %s: more than %d redirects", Redact(via[0].URL), maxRedirects)
			}
			return p.Check(req.URL)
		},
	}
}

// DialContext connects as the policy's HTTP client does (dialContext),
// for other clients that hold to the policy: kplan's proxy for git.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if p == nil {
		host, _, _ := net.SplitHostPort(addr)
		return nil, (*Policy)(nil).refused("", host, "", "renders fetch from no host")
	}
	return p.dialContext(ctx, network, addr)
}

// dialContext connects to addr ("host:port", as the transport asks before
// any lookup) when the policy allows the host, and refuses, after the
// lookup and before connecting, every special-purpose address unless the
// host is named exactly.
func (p *Policy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ok, exact := p.Allowed(host)
	if !ok {
		return nil, p.refused("", host, "", fmt.Sprintf("host %s is not among the hosts renders may fetch from", host))
	}
	d := net.Dialer{Timeout: dialTimeout}
	if !exact {
		d.Control = func(network, address string, c syscall.RawConn) error {
			if err := p.guard.Safe(network, address, c); err != nil {
				ip, _, _ := net.SplitHostPort(address)
				return p.refused("", host, ip, reason(err))
			}
			return nil
		}
	}
	return d.DialContext(ctx, network, addr)
}

func reason(err error) string {
	switch {
	case errors.Is(err, ssrf.ErrProhibitedIP):
		return "a loopback, private, link-local or other special-purpose address"
	case errors.Is(err, ssrf.ErrProhibitedNetwork):
		return "not a TCP connection"
	}
	return err.Error()
}

// Transport is a RoundTripper holding to the policy, for clients that
// speak a protocol of their own over it (go-containerregistry's, for OCI
// registries): every request, each redirect and token request included,
// is checked as Get checks it before anything is sent, and connects as
// the policy's client does. A nil policy refuses every request.
func (p *Policy) Transport() http.RoundTripper { return checked{p: p} }

// TLSTransport is Transport with cfg as its TLS client configuration (a
// chart repository's CA, client certificate, or insecure_skip_tls_verify,
// from Helm's repositories.yaml); a nil cfg is Transport.
func (p *Policy) TLSTransport(cfg *tls.Config) http.RoundTripper {
	if p == nil || cfg == nil {
		return p.Transport()
	}
	tr, ok := p.client.Transport.(*http.Transport)
	if !ok {
		return p.Transport()
	}
	tr = tr.Clone()
	tr.TLSClientConfig = cfg
	return checked{p: p, rt: tr}
}

type checked struct {
	p  *Policy
	rt http.RoundTripper // nil: the policy's client's
}

func (c checked) RoundTrip(req *http.Request) (*http.Response, error) {
	var err error
	if c.p == nil {
		err = (*Policy)(nil).refused(Redact(req.URL), req.URL.Hostname(), "", "renders fetch from no host")
	} else {
		err = c.p.Check(req.URL)
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // as a RoundTripper must, whatever it returns
		}
		return nil, err
	}
	rt := c.rt
	if rt == nil {
		rt = c.p.client.Transport
	}
	resp, err := rt.RoundTrip(req)
	var refused *RefusedError
	if errors.As(err, &refused) && refused.URL == "" { // refused at connect time
		refused.URL = Redact(req.URL)
	}
	return resp, err
}

// Fetch returns the body of a GET of rawURL, at most max bytes (<= 0: no
// limit), when the policy allows it; a *RefusedError (wrapped) when not.
// A response other than 2xx is an error: there is no fallback.
func (p *Policy) Fetch(ctx context.Context, rawURL string, max int64) ([]byte, error) {
	r, err := p.Get(ctx, rawURL, nil, max)
	if err != nil {
		return nil, err
	}
	if r.Status < 200 || r.Status > 299 {
		return nil, fmt.Errorf("fetch %s: %s", r.URL, r.StatusText)
	}
	return r.Body, nil
}

// Response is the answer to a Get.
type Response struct {
	URL        string // the URL asked for, redacted
	Status     int
	StatusText string // as "404 Not Found"
	Header     http.Header
	Body       []byte
}

// Get is a GET of rawURL with header, as Fetch makes it, that returns
// any answer: a client that must read a 401's challenge (an OCI
// registry's token dance) reads it here.
func (p *Policy) Get(ctx context.Context, rawURL string, header http.Header, max int64) (*Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if p == nil {
		return nil, (*Policy)(nil).refused(Redact(u), u.Hostname(), "", "renders fetch from no host")
	}
	if err := p.Check(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", Redact(u), err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			if refused.URL == "" { // refused at connect time
				refused.URL = Redact(u)
				return nil, refused
			}
			if refused.URL != Redact(u) {
				return nil, fmt.Errorf("fetch %s: redirected: %w", Redact(u), refused)
			}
			return nil, refused
		}
		return nil, fmt.Errorf("fetch %s: %w", Redact(u), err)
	}
	defer resp.Body.Close()
	body := io.Reader(resp.Body)
	if max > 0 {
		body = io.LimitReader(resp.Body, max+1)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", Redact(u), err)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, &TooLargeError{URL: Redact(u), Limit: max}
	}
	return &Response{URL: Redact(u), Status: resp.StatusCode, StatusText: resp.Status, Header: resp.Header, Body: data}, nil
}

// TooLargeError says a fetched body was over the bytes left to its render.
type TooLargeError struct {
	URL   string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("fetch %s: the body is over the %d bytes the render has left to read", e.URL, e.Limit)
}
