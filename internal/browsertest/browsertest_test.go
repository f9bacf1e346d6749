package browsertest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// The browser reports what a page shows with its scripts off, and every
// request it makes: a page that loads a stylesheet and an image makes
// two more than its own, one that loads nothing makes none.
func TestPagesShowTextAndRequests(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>p</title><link rel="icon" href="data:,"><p class="x">one</p><p class="x">two</p>` +
			`<script>document.querySelector(".x").innerText = "a script ran"</script>`))
	})
	mux.HandleFunc("/loads", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><link rel="icon" href="data:,"><link rel="stylesheet" href="/style.css"><img src="/pic.png"><p>x</p>`))
	})
	mux.HandleFunc("/style.css", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Content-Type", "text/css") })
	mux.HandleFunc("/pic.png", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b := Start(t)
	p := b.Open(t, srv.URL+"/plain", http.Header{"Authorization": {"Bearer t"}})
	if got := p.Texts(".x"); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("texts %q, want one and two, the script not run", got)
	}
	if got := p.Elsewhere(); len(got) != 0 {
		t.Errorf("a page that loads nothing made requests: %+v", got)
	}
	if got := p.Requests(); len(got) != 1 || got[0].Type != "Document" {
		t.Errorf("requests %+v, want the page's own", got)
	}

	p = b.Open(t, srv.URL+"/loads", nil)
	var got []string
	for _, r := range p.Elsewhere() {
		got = append(got, r.URL[len(srv.URL):])
	}
	slices.Sort(got)
	if want := []string{"/pic.png", "/style.css"}; !slices.Equal(got, want) {
		t.Errorf("requests beyond the page %q, want %q", got, want)
	}
}
