package gitbase

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// proxy is the HTTP proxy git fetches through: it connects as the policy
// allows, for CONNECT (https) and for plain http requests alike, and
// passes redirects back to git, which does not follow them.
type proxy struct {
	URL    string
	policy Policy
	srv    *http.Server
	tr     *http.Transport

	mu      sync.Mutex
	refused map[string]error // host -> the last connection to it the policy refused
}

func startProxy(policy Policy) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{URL: "http://" + ln.Addr().String(), policy: policy, refused: map[string]error{}}
	p.tr = &http.Transport{Proxy: nil, DialContext: p.dial, ResponseHeaderTimeout: 60 * time.Second}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy and its tunnels.
func (p *proxy) Close() error {
	p.tr.CloseIdleConnections()
	return p.srv.Close()
}

// refusal returns the last refusal of a connection to host, and forgets it.
func (p *proxy) refusal(host string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.refused[host]
	delete(p.refused, host)
	return err
}

func (p *proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := p.policy.DialContext(ctx, network, addr)
	if err != nil {
		host, _, _ := net.SplitHostPort(addr)
		p.mu.Lock()
		p.refused[host] = err
		p.mu.Unlock()
	}
	return conn, err
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if r.URL.Host == "" || (r.URL.Scheme != "http") {
		http.Error(w, "kplan's git proxy: want an absolute http URL or CONNECT", http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Connection")
	out.Header.Del("Proxy-Authorization")
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := p.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "kplan's git proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, buf) // what git sent after CONNECT, then the rest
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
	wg.Wait()
	up.Close()
	down.Close()
}

func closeWrite(c net.Conn) {
	if t, ok := c.(interface{ CloseWrite() error }); ok {
		_ = t.CloseWrite()
	}
}
