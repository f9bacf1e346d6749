package status

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"
)

//go:embed page.html
var files embed.FS

// page is the status page's template: one file, its style inline, no
// script, nothing loaded from anywhere (its Content-Security-Policy says
// so to the browser).
var page = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"ago":    ago,
	"object": Object,
	"clock":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"short": func(s string) string {
		if len(s) > 7 {
			return s[:7]
		}
		return s
	},
}).ParseFS(files, "page.html"))

// contentSecurityPolicy lets the page load nothing: no script, no font,
// no frame, no image but the empty icon inline (without it the browser
// asks for /favicon.ico); only its own inline style.
const contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the board: GET / as HTML (as JSON when the request
// accepts application/json and not text/html), GET /status.json as JSON.
type Handler struct {
	Board  *Board
	Logger *slog.Logger
}

// ServeHTTP implements http.Handler.
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := h.Board.Page()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Path == "/status.json" || wantsJSON(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // "<cluster>" as written
		enc.Encode(p)
		return
	}
	var b bytes.Buffer
	if err := page.Execute(&b, viewOf(p)); err != nil {
		// A bug of the template: say so rather than serve half a page.
		if h.Logger != nil {
			h.Logger.Error("status page", "err", err)
		}
		http.Error(w, "kplan-webhook: the status page failed to render (a bug: please report it); GET /status.json has the same content", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Write(b.Bytes())
}

// wantsJSON says whether an Accept header asks for JSON rather than
// HTML: it names application/json and not text/html.
func wantsJSON(accept string) bool {
	json, html := false, false
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json":
			json = true
		case "text/html":
			html = true
		}
	}
	return json && !html
}

// Guard asks every request for token, as a bearer token
// ("Authorization: Bearer TOKEN", for scripts and Prometheus) or as the
// password of HTTP basic authentication (any user name, for a browser,
// which asks for it); an empty token lets every request through.
func Guard(token []byte, next http.Handler) http.Handler {
	if len(token) == 0 {
		return next
	}
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []byte
		if _, pass, ok := r.BasicAuth(); ok {
			got = []byte(pass)
		} else if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = []byte(strings.TrimSpace(t))
		}
		sum := sha256.Sum256(got)
		if got == nil || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Add("WWW-Authenticate", `Basic realm="kplan-webhook", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="kplan-webhook"`)
			http.Error(w, "kplan-webhook: this page needs the admin token (KPLAN_ADMIN_TOKEN): send it as a bearer token, or as the password of basic authentication", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ago says how long before now t was, for people ("3m ago").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// view is what the template reads: the page, its targets grouped by
// cluster and environment.
type view struct {
	Page
	Clusters []clusterView
	Failing  int // targets whose last deploy did not deploy
	Drifted  int // targets with drifted objects
}

type clusterView struct {
	Name         string
	Environments []envView
}

type envView struct {
	Name    string
	Targets []Target
}

func viewOf(p Page) view {
	v := view{Page: p}
	for _, t := range p.Targets { // sorted by cluster, then environment
		if n := len(v.Clusters); n == 0 || v.Clusters[n-1].Name != t.Cluster {
			v.Clusters = append(v.Clusters, clusterView{Name: t.Cluster})
		}
		c := &v.Clusters[len(v.Clusters)-1]
		if n := len(c.Environments); n == 0 || c.Environments[n-1].Name != t.Environment {
			c.Environments = append(c.Environments, envView{Name: t.Environment})
		}
		e := &c.Environments[len(c.Environments)-1]
		e.Targets = append(e.Targets, t)
		if len(t.Deploys) > 0 && t.Deploys[0].Outcome != Deployed {
			v.Failing++
		}
	}
	for _, d := range p.Drift {
		if len(d.Drifted) > 0 {
			v.Drifted++
		}
	}
	return v
}
