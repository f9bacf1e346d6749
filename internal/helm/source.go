package helm

import (
	"cmp"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplan-dev/kplan/internal/charts"
)

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

// Refused reports whether err is a fetch the network policy refused (or
// a plan fetching from no host): it fails alike on every run, whatever
// the network does.
func Refused(err error) bool { return charts.Refused(err) }

func cmpOr(a, b string) string { return cmp.Or(a, b) }

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
