package markers

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Reviewed is what a plan comment records, hidden, of the plan a reviewer
// read: the commits compared and the digest of each planned overlay's
// head render (inventory.ObjectSet.Digest). The deploy of a merge
// compares what it applies with it.
type Reviewed struct {
	Base string `json:"base"` // the base commit planned
	Head string `json:"head"` // the commit planned as the merge's result
	// Digests by overlay path, of the overlays head rendered; an overlay
	// whose head render failed, that the head removes or that was not
	// rendered is absent.
	Digests map[string]string `json:"digests"`
	// Skipped are the overlays the plan did not render because the
	// change cannot affect them (proven from their closures): unchanged,
	// with no digest. An overlay in neither list was not reviewed.
	Skipped []string `json:"skipped,omitempty"`
	// Settings are the render settings the plan used.
	Settings inventorydiff.Settings `json:"settings"`
}

const (
	reviewedOpen  = "<!-- kplan:reviewed "
	reviewedClose = " -->"
	// reviewedDigestChars keeps "sha256:" and 128 bits of each digest: a
	// marker for hundreds of overlays must fit in the comment.
	reviewedDigestChars = len("sha256:") + 32
	// maxReviewed bounds what ParseReviewed inflates: the marker is read
	// from a comment anyone with write access could have edited.
	maxReviewed = 4 << 20
)

// ShortDigest is the part of a digest a Reviewed marker keeps; compare a
// full digest with a marker's through it.
func ShortDigest(d string) string {
	if len(d) > reviewedDigestChars {
		return d[:reviewedDigestChars]
	}
	return d
}

// ReviewedMarker encodes r as a hidden HTML comment (gzipped JSON in
// base64) to put in the plan comment's body.
func ReviewedMarker(r Reviewed) (string, error) {
	short := Reviewed{Base: r.Base, Head: r.Head, Digests: make(map[string]string, len(r.Digests)), Skipped: r.Skipped, Settings: r.Settings}
	for o, d := range r.Digests {
		short.Digests[o] = ShortDigest(d)
	}
	data, err := json.Marshal(short)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return "", err
	}
	return reviewedOpen + base64.StdEncoding.EncodeToString(b.Bytes()) + reviewedClose, nil
}

// ParseReviewed reads the Reviewed marker in a comment body; ok is false
// when there is none. A marker that does not decode is an error.
func ParseReviewed(body string) (r Reviewed, ok bool, err error) {
	i := strings.Index(body, reviewedOpen)
	if i < 0 {
		return Reviewed{}, false, nil
	}
	rest := body[i+len(reviewedOpen):]
	j := strings.Index(rest, reviewedClose)
	if j < 0 {
		return Reviewed{}, false, fmt.Errorf("reviewed-plan marker: not closed")
	}
	data, err := base64.StdEncoding.DecodeString(rest[:j])
	if err != nil {
		return Reviewed{}, false, fmt.Errorf("reviewed-plan marker: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return Reviewed{}, false, fmt.Errorf("reviewed-plan marker: %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(zr, maxReviewed+1))
	if err != nil {
		return Reviewed{}, false, fmt.Errorf("reviewed-plan marker: %w", err)
	}
	if len(plain) > maxReviewed {
		return Reviewed{}, false, fmt.Errorf("reviewed-plan marker: more than %d bytes", maxReviewed)
	}
	if err := json.Unmarshal(plain, &r); err != nil {
		return Reviewed{}, false, fmt.Errorf("reviewed-plan marker: %w", err)
	}
	return r, true, nil
}

// WasSkipped says whether the plan proved overlay unaffected by the change
// and so did not render it.
func (r *Reviewed) WasSkipped(overlay string) bool {
	_, ok := slices.BinarySearch(r.Skipped, overlay)
	return ok
}
