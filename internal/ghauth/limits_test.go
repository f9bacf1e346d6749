package ghauth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
)

// A mint GitHub rate-limits (a secondary limit: 403 or 429 with
// Retry-After) is tried again once the time GitHub asked for has passed,
// not before, and the caller gets a token: a deploy's fetch no longer
// fails until the next resync.
func TestMintWaitsOutRetryAfter(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			gh := fakeGitHub(t, time.Hour)
			app, err := NewApp(appID, pemOf(appKey(t)), 77, gh.URL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			gh.SecondaryRateLimitNext(1, status, time.Second)
			start := time.Now()
			tok, err := app.Token(context.Background(), "octo/config")
			took := time.Since(start)
			if err != nil || !gh.ValidToken(tok) {
				t.Fatalf("Token: %q, %v", tok, err)
			}
			if took < time.Second {
				t.Errorf("minted again after %s, before the Retry-After of 1 s", took)
			}
			if n := count(gh, "POST", "/access_tokens"); n != 2 {
				t.Errorf("%d mint requests, want 2 (the limited one, then one after Retry-After)", n)
			}
		})
	}
}

// A Retry-After longer than MaxMintWait fails the call at once, and every
// call until it passes fails without asking GitHub again.
func TestMintLongRetryAfterIsNotHammered(t *testing.T) {
	gh := fakeGitHub(t, time.Hour)
	app, err := NewApp(appID, pemOf(appKey(t)), 77, gh.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gh.SecondaryRateLimitNext(1, http.StatusTooManyRequests, 2*time.Hour)
	start := time.Now()
	for i := range 3 {
		_, err := app.Token(context.Background(), "octo/config")
		if err == nil || !strings.Contains(err.Error(), "rate-limits minting") {
			t.Fatalf("call %d: err %v, want the rate limit", i, err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the calls took %s: they waited for a limit longer than MaxMintWait", took)
	}
	if n := count(gh, "POST", "/access_tokens"); n != 1 {
		t.Errorf("%d mint requests, want 1: none before Retry-After passes", n)
	}
}

// How long a refused mint waits, from GitHub's answer.
func TestMintLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name    string
		status  int
		header  map[string]string
		limited bool
		wait    time.Duration
	}{
		{"429 with Retry-After", 429, map[string]string{"Retry-After": "7"}, true, 7 * time.Second},
		{"403 with Retry-After", 403, map[string]string{"Retry-After": "30"}, true, 30 * time.Second},
		{"429 without", 429, nil, true, time.Minute},
		{"403 with the primary limit exhausted", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000010"}, true, 11 * time.Second},
		{"Retry-After 0", 429, map[string]string{"Retry-After": "0"}, true, time.Second},
		{"403 refusal (no permission)", 403, nil, false, 0},
		{"401", 401, map[string]string{"Retry-After": "7"}, false, 0},
		{"502", 502, nil, false, 0},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		resp := &http.Response{StatusCode: tc.status, Header: h, Body: io.NopCloser(strings.NewReader(""))}
		err := fmt.Errorf("refresh: %w", &ghinstallation.HTTPError{Response: resp})
		wait, limited := mintLimit(err, now)
		if limited != tc.limited || wait != tc.wait {
			t.Errorf("%s: limited %v for %s, want %v for %s", tc.name, limited, wait, tc.limited, tc.wait)
		}
	}
}

// A token GitHub answers 401 to (revoked before its expiry) is dropped
// by the transport; the next request goes with a freshly minted one. A
// 401 to an older token drops nothing.
func TestRefusedTokenIsMintedAgain(t *testing.T) {
	gh := fakeGitHub(t, time.Hour)
	app, err := NewApp(appID, pemOf(appKey(t)), 0, gh.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := &http.Client{Transport: Transport(app, nil)}
	get := func() int {
		resp, err := client.Get(gh.URL() + "/repos/octo/config/commits/main/statuses")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tok1, err := app.Token(ctx, "octo/config")
	if err != nil {
		t.Fatal(err)
	}
	gh.Revoke(tok1)
	if code := get(); code != http.StatusUnauthorized {
		t.Fatalf("with the revoked token: HTTP %d", code)
	}
	if code := get(); code != http.StatusOK {
		t.Errorf("the request after the 401: HTTP %d, want it through with a fresh token", code)
	}
	tok2, err := app.Token(ctx, "octo/config")
	if err != nil || tok2 == tok1 || !gh.ValidToken(tok2) {
		t.Fatalf("after the 401: %q, %v; want a fresh valid token", tok2, err)
	}
	app.Refused(ctx, "octo/config", tok1) // a late 401 to the old token
	if tok, _ := app.Token(ctx, "octo/config"); tok != tok2 {
		t.Error("a 401 to the old token dropped the fresh one")
	}
	if n := len(gh.Minted()); n != 2 {
		t.Errorf("%d tokens minted, want 2", n)
	}
}
