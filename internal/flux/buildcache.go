package flux

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kplan-dev/kplan/internal/crash"
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
	parts := []string{"kplan-flux-build/2", e.opts.CacheVersion, string(obj), "root=" + t.Root, fmt.Sprint("within=", t.Within),
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

// keptPost is a target's post-build (postBuild), kept by its build's
// key and the variables it substitutes.
type keptPost struct {
	objs               []*yaml.RNode
	notes, notRendered []string
	reads              []string
	err                error
}

// postBuildKey names t's post-build: its build's key (which names t's
// spec) and the ConfigMaps and Secrets its substitution reads from pool.
// Root and parent Kustomizations are the same on both sides of most
// plans: re-encoding their objects as Flux reads them was a third of a
// one-image bump's CPU. "" when the build has no key.
func (e *Engine) postBuildKey(t *Target, pool varPool) string {
	if t.key == "" {
		return ""
	}
	// A ResourceSet's copyFrom reads any ConfigMap of the cluster.
	copies := ""
	if slices.ContainsFunc(t.Objects, func(o *yaml.RNode) bool { return isOperator(o, rsetKind) }) {
		copies = pool.configMapsKey()
	}
	return rendercache.Key("kplan-flux-postbuild/3", t.key, t.ID(), pool.key(t.Kustomization), copies)
}

// postBuilt sets t's post-built objects, notes and error from the ones
// kept under key, by this Engine or in the cache directory, and says
// whether there were.
func (e *Engine) postBuilt(key string, t *Target) bool {
	if key == "" {
		return false
	}
	v, ok := e.posts.Load(key)
	if !ok {
		k, ok := e.cachedPost(key)
		if !ok {
			return false
		}
		v, _ = e.posts.LoadOrStore(key, k)
	}
	k := v.(*keptPost)
	t.Objects, t.Err = copyNodes(k.objs), k.err
	t.Notes = append(t.Notes, k.notes...)
	t.NotRendered = append(t.NotRendered, k.notRendered...)
	t.reads = slices.Clone(k.reads)
	return true
}

// postMeta is what a post-build says beside its objects, kept in the
// cache directory as an entry of its own (under the post-build key's
// metaKey): one object, these fields.
type postMeta struct {
	Notes       []string `yaml:"notes,omitempty"`
	NotRendered []string `yaml:"notRendered,omitempty"`
	Reads       []string `yaml:"reads,omitempty"`
}

func metaKey(key string) string { return rendercache.Key(key, "meta") }

// cachedPost reads a post-build kept in the cache directory.
func (e *Engine) cachedPost(key string) (*keptPost, bool) {
	if e.opts.Cache == nil {
		return nil, false
	}
	meta, ok := e.opts.Cache.Get(metaKey(key))
	if !ok || meta.Err != nil || len(meta.Objects) != 1 {
		return nil, false
	}
	var m postMeta
	if err := meta.Objects[0].YNode().Decode(&m); err != nil {
		return nil, false
	}
	ent, ok := e.opts.Cache.Get(key)
	if !ok {
		return nil, false
	}
	return &keptPost{objs: ent.Objects, err: ent.Err, notes: m.Notes, notRendered: m.NotRendered, reads: m.Reads}, true
}

// keepPostBuilt keeps t's post-build under key, in this Engine and in
// the cache directory; the notes t had before it are its build's. A
// post-build cut short (a panic, a cancelled plan) is not the commit's:
// never kept.
func (e *Engine) keepPostBuilt(ctx context.Context, key string, t *Target, notesBefore, notRenderedBefore int) {
	if key == "" || ctx.Err() != nil || crash.As(t.Err) != nil {
		return
	}
	k := &keptPost{objs: copyNodes(t.Objects), err: t.Err, reads: slices.Clone(t.reads),
		notes: slices.Clone(t.Notes[notesBefore:]), notRendered: slices.Clone(t.NotRendered[notRenderedBefore:])}
	e.posts.Store(key, k)
	if e.opts.Cache == nil {
		return
	}
	meta := yaml.NewMapRNode(nil)
	for _, f := range []struct {
		name string
		list []string
	}{{"notes", k.notes}, {"notRendered", k.notRendered}, {"reads", k.reads}} {
		if len(f.list) > 0 {
			if err := meta.PipeE(yaml.SetField(f.name, yaml.NewListRNode(f.list...))); err != nil {
				return
			}
		}
	}
	// The objects first: an entry without its meta is a miss.
	err := e.opts.Cache.Put(key, rendercache.Entry{Objects: t.Objects, Err: t.Err})
	if err == nil {
		err = e.opts.Cache.Put(metaKey(key), rendercache.Entry{Objects: []*yaml.RNode{meta}})
	}
	if err != nil {
		slog.Debug("Flux post-build not cached", "err", err)
	}
}
