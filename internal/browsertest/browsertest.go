// Package browsertest opens pages in a real browser for tests: Debian's
// headless Chromium (apt-get install chromium; `make test` installs it,
// `make browser` alone), driven over the DevTools protocol with
// github.com/chromedp/chromedp. A page is opened with its scripts off,
// as a reader without JavaScript sees it; the test reads what it shows
// (the text of elements), every request it made (to check it loaded
// nothing from the network), and can save a screenshot.
package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// EnvChromium names the browser to run instead of the one on PATH
// (chromium, then chromium-browser, google-chrome).
const EnvChromium = "KPLAN_CHROMIUM"

// Path is the Chromium the tests run: $KPLAN_CHROMIUM, else the first of
// chromium, chromium-browser and google-chrome on PATH; "" when none is.
func Path() string {
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// timeout bounds each step a test takes in the browser (start, open,
// read): the machine may be loaded, but a page of kplan's renders in
// well under a second.
const timeout = time.Minute

// Browser is one headless Chromium with an empty profile of its own,
// stopped when the test ends.
type Browser struct {
	ctx context.Context
}

// Start starts Chromium for t; it fails t, saying how to install it,
// when there is none.
func Start(t testing.TB) *Browser {
	t.Helper()
	path := Path()
	if path == "" {
		t.Fatalf("no Chromium on PATH: install Debian's (apt-get install chromium, or `make browser`), or set %s", EnvChromium)
	}
	// The flags that run here and in CI: no sandbox (root, in a
	// container), no GPU, and nothing the browser would fetch on its own
	// (updates, sync, QUIC probes), so that every request a test sees is
	// its page's.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(f string, args ...any) { t.Logf("chromium: "+f, args...) }))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser, and lives as long as its context:
	// it takes no timeout of its own (a timeout would stop the browser).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return &Browser{ctx: ctx}
}

// Request is one request a page made.
type Request struct {
	URL, Method string
	Type        string // Document, Stylesheet, Image, Font, Script, Fetch, Other …
}

// Page is a page open in its own tab.
type Page struct {
	t   testing.TB
	ctx context.Context
	url string

	mu       sync.Mutex
	requests []Request
}

// Open opens url in a new tab with header added to every request (an
// Authorization header), its scripts off, and waits until it has
// loaded.
func (b *Browser) Open(t testing.TB, url string, header http.Header) *Page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	p := &Page{t: t, ctx: ctx, url: url}
	// Every request the tab sends, seen before the command that caused
	// it returns.
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			p.mu.Lock()
			p.requests = append(p.requests, Request{URL: e.Request.URL, Method: e.Request.Method, Type: string(e.Type)})
			p.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	headers := network.Headers{}
	for k, vs := range header {
		headers[k] = strings.Join(vs, ", ")
	}
	err = p.run(
		call(network.Enable, network.EnableParams{}),
		call(network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: headers}),
		call(emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}),
		chromedp.Navigate(url),
		chromedp.WaitReady("body"),
	)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return p
}

// call is an action that sends one command of the protocol.
func call[P, R any](cmd cdp.Command[P, R], params P) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cmd, params)
		return err
	})
}

// run runs actions on the page's tab, bounded by timeout.
func (p *Page) run(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// get runs one action that returns a value on the page's tab, bounded by
// timeout.
func get[T any](p *Page, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// Requests are the requests the page made so far, the page's own first.
func (p *Page) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Elsewhere are the requests the page made for anything but itself: a
// page that loads nothing from the network makes none.
func (p *Page) Elsewhere() []Request {
	var out []Request
	for _, r := range p.Requests() {
		if r.URL != p.url {
			out = append(out, r)
		}
	}
	return out
}

// Text is the text the first element matching the CSS selector shows
// (its innerText); it fails the test when none matches.
func (p *Page) Text(selector string) string {
	p.t.Helper()
	texts := p.Texts(selector)
	if len(texts) == 0 {
		p.t.Fatalf("%s shows no %s", p.url, selector)
	}
	return texts[0]
}

// Texts are the texts every element matching the CSS selector shows, in
// document order.
func (p *Page) Texts(selector string) []string {
	p.t.Helper()
	// Read through the DevTools protocol: the page's own scripts are off.
	js := fmt.Sprintf(`Array.from(document.querySelectorAll(%q), e => e.innerText)`, selector)
	out, err := get(p, chromedp.Evaluate[[]string](js))
	if err != nil {
		p.t.Fatalf("read %s of %s: %v", selector, p.url, err)
	}
	return out
}

// Attrs are the values of attribute name of every element matching the
// CSS selector, in document order, as the browser resolved them (a
// link's href is absolute).
func (p *Page) Attrs(selector, name string) []string {
	p.t.Helper()
	js := fmt.Sprintf(`Array.from(document.querySelectorAll(%q), e => e[%q] ?? e.getAttribute(%q) ?? "")`, selector, name, name)
	out, err := get(p, chromedp.Evaluate[[]string](js))
	if err != nil {
		p.t.Fatalf("read %s's %s of %s: %v", selector, name, p.url, err)
	}
	return out
}

// Screenshot saves the whole page as a PNG at path.
func (p *Page) Screenshot(path string) {
	p.t.Helper()
	png, err := get(p, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot of %s: %v", p.url, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
