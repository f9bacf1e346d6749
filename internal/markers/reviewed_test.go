package markers

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/kplan-dev/kplan/test/fuzzseed"
)

// A plan comment's reviewed marker survives the comment around it, keeps
// 128 bits of each digest, stays small for hundreds of overlays, and a
// damaged one is an error, never a plan.
func TestReviewedMarkerRoundTrip(t *testing.T) {
	digest := func(i int) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte{byte(i), byte(i >> 8)})) }
	r := Reviewed{Base: "b1", Head: "h2", Digests: map[string]string{}}
	for i := range 400 {
		r.Digests[fmt.Sprintf("apps/team-%03d/overlays/production", i)] = digest(i)
	}
	m, err := ReviewedMarker(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) > 12000 {
		t.Errorf("marker for 400 overlays is %d characters", len(m))
	}
	got, ok, err := ParseReviewed("### kplan: 1 to add\n" + m + "\n<details>…</details>")
	if err != nil || !ok {
		t.Fatalf("parse: %v %v", ok, err)
	}
	want := Reviewed{Base: "b1", Head: "h2", Digests: map[string]string{}}
	for o, d := range r.Digests {
		want.Digests[o] = ShortDigest(d)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: %+v", got)
	}
	if d := digest(1); ShortDigest(d) != d[:39] || len(d) != 71 {
		t.Errorf("short digest %s of %s", ShortDigest(d), d)
	}
	if _, ok, err := ParseReviewed("no marker"); ok || err != nil {
		t.Errorf("no marker: %v %v", ok, err)
	}
	for _, bad := range []string{reviewedOpen + "!!!" + reviewedClose, reviewedOpen + "H4sI", reviewedOpen + "aGVsbG8=" + reviewedClose} {
		if _, ok, err := ParseReviewed(bad); ok || err == nil {
			t.Errorf("%q: ok=%v err=%v, want an error", bad, ok, err)
		}
	}
}

// The reviewed-plan marker is read from a comment anyone with write
// access may have edited: whatever the body holds, ParseReviewed returns
// a marker or an error, never panics, and a marker it returns is written
// again as one that reads back the same.
func FuzzParseReviewed(f *testing.F) {
	for _, data := range fuzzseed.Files(f, "testdata/reviewed/*") {
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, ok, err := ParseReviewed(body)
		if err != nil || !ok {
			return
		}
		m, err := ReviewedMarker(r)
		if err != nil {
			t.Fatalf("a parsed marker cannot be written: %v", err)
		}
		again, ok, err := ParseReviewed(m)
		if err != nil || !ok || again.Base != r.Base || again.Head != r.Head || len(again.Digests) != len(r.Digests) || !slices.Equal(again.Skipped, r.Skipped) {
			t.Fatalf("%+v written and read back is %+v (%v, %v)", r, again, ok, err)
		}
	})
}
