package closure

import (
	"maps"
	"path"
	"slices"
)

// Union gathers what a target made of several builds and files reads
// (a Flux Kustomization: its path's build or generated tree and its
// components; an Argo CD Application: its sources, value files and the
// file declaring it) into one closure, so that the engines planning such
// targets bound them alike.
type Union struct {
	c   Closure
	set map[string]bool
}

// NewUnion starts the closure of the target id.
func NewUnion(id string) *Union {
	return &Union{c: Closure{Overlay: id}, set: map[string]bool{}}
}

// Add takes in a build's closure: its paths, its remote references, and
// the first reason and error that leave it unbounded.
func (u *Union) Add(c *Closure) {
	for _, p := range c.Paths {
		u.set[p] = true
	}
	u.c.Remote = append(u.c.Remote, c.Remote...)
	u.c.OpenAPI = u.c.OpenAPI || c.OpenAPI
	u.Unbound(c.Unbounded)
	if u.c.Err == nil {
		u.c.Err = c.Err
	}
}

// Path adds a path the target reads.
func (u *Union) Path(p string) { u.set[p] = true }

// Unbound says why the target cannot be bounded, unless a reason is
// known already.
func (u *Union) Unbound(why string) {
	if u.c.Unbounded == "" {
		u.c.Unbounded = why
	}
}

// Paths are the paths added so far, sorted.
func (u *Union) Paths() []string { return slices.Sorted(maps.Keys(u.set)) }

// Closure is the union: the paths added with every directory above them
// and the root (a build lists a directory before reading below it),
// sorted.
func (u *Union) Closure() *Closure {
	for p := range u.set {
		for d := path.Dir(p); d != "." && !u.set[d]; d = path.Dir(d) {
			u.set[d] = true
		}
	}
	u.set["."] = true
	out := u.c
	out.Paths = u.Paths()
	return &out
}
