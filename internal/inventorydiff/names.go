package inventorydiff

import (
	"time"

	"github.com/kplan-dev/kplan/internal/inventory"
)

// Name is how a reader names an object: "Deployment web (prod)", its
// kind, name and namespace; "Namespace prod" when cluster-scoped. The
// seed key (group_version_kind|namespace|name) stays in JSON, where
// tools match it; a key that does not parse is shown as it is.
func Name(key string) string {
	id, err := inventory.ParseKey(key)
	if err != nil {
		return key
	}
	if id.Namespace == "" {
		return id.Kind + " " + id.Name
	}
	return id.Kind + " " + id.Name + " (" + id.Namespace + ")"
}

// Kind is the kind of the object a key names ("" when it does not parse).
func Kind(key string) string {
	id, err := inventory.ParseKey(key)
	if err != nil {
		return ""
	}
	return id.Kind
}

// Work says how much a plan rendered and how long it took, for the
// report's footer.
type Work struct {
	Overlays  int           // overlays on either side
	Skipped   int           // overlays the change cannot affect, not rendered
	Rendered  int           // kustomize builds run (one overlay on one side each)
	CacheHits int           // builds read from the render cache instead
	Took      time.Duration // the whole plan, reading git included
	// Shards is how many runners shared the plan (kplan merge): the
	// counts are their sums and Took the longest; 0 for one run.
	Shards int
}
