package flux

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/rendercache"
	"github.com/kplan-dev/kplan/internal/snapshot"
)

// buildKey names t's kustomize build by everything it reads: the
// Kustomization as Flux sees it (its spec drives the generator), the
// source directory it builds from, and the state of every path of its
// build. Root and parent Kustomizations output their children's
// Kustomization objects only, so a change inside an app leaves their
// keys alone: both sides of a plan build them once, and with a cache
// directory no plan builds them again. "" when the build cannot be named
// (it reads the network, or its spec does not encode).
func (e *Engine) buildKey(s *snapshot.Snapshot, t *Target) string {
	if t.Closure == nil || !t.Closure.Bounded() || len(t.Closure.Remote) > 0 {
		return ""
	}
	obj, err := json.Marshal(t.Object) // map keys sorted: stable
	if err != nil {
		return ""
	}
	parts := []string{"kplan-flux-build/1", e.opts.CacheVersion, string(obj), "root=" + t.Root, fmt.Sprint("within=", t.Within),
		fmt.Sprint("openapi=", t.Closure.OpenAPI)}
	for _, p := range t.built {
		parts = append(parts, p+"="+s.Index.State(p))
	}
	return rendercache.Key(parts...)
}

// cached returns a copy of the build kept under key, from this Engine or
// the cache directory.
func (e *Engine) cached(key string) ([]*yaml.RNode, error, bool) {
	if key == "" {
		return nil, nil, false
	}
	if b, ok := e.builds.Load(key); ok {
		return copyNodes(b.(*kept).objs), b.(*kept).err, true
	}
	if e.opts.Cache == nil {
		return nil, nil, false
	}
	ent, ok := e.opts.Cache.Get(key)
	if !ok {
		return nil, nil, false
	}
	e.builds.Store(key, &kept{objs: copyNodes(ent.Objects), err: ent.Err})
	return ent.Objects, ent.Err, true
}

// store keeps a build under key.
func (e *Engine) store(key string, objs []*yaml.RNode, err error) {
	if key == "" {
		return
	}
	e.builds.Store(key, &kept{objs: copyNodes(objs), err: err})
	if e.opts.Cache != nil {
		if perr := e.opts.Cache.Put(key, rendercache.Entry{Objects: objs, Err: err}); perr != nil {
			slog.Debug("Flux build not cached", "err", perr)
		}
	}
}

func copyNodes(objs []*yaml.RNode) []*yaml.RNode {
	if objs == nil {
		return nil
	}
	out := make([]*yaml.RNode, len(objs))
	for i, o := range objs {
		out[i] = o.Copy()
	}
	return out
}
