package plan

import (
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/kplan-dev/kplan/internal/closure"
	"github.com/kplan-dev/kplan/internal/inventory"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/repoconfig"
)

// unread lists the changed files that no overlay's build reads on either
// side. A closure is every path its build can read (the corpus check
// proves it), so changing such a file cannot change any render: the plan
// says so rather than "no change", since something else — a Flux
// Kustomization, a script — may still deploy it. A build the static
// reading cannot bound is taken to read everything under its overlay.
func (p *planner) unread(sides [2]*side, changed map[string]bool) []inventorydiff.UnreadFile {
	notListed := p.notListed(sides)
	// The changed files no unbounded build may read, then those no
	// closure names: a change touches a few files, a plan of thousands
	// of targets holds hundreds of thousands of closure paths.
	var files []string
	for _, f := range slices.Sorted(maps.Keys(changed)) {
		if isFile(sides, f) && f != repoconfig.File && !under(f, notListed) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil
	}
	read := p.readOf(sides, files)
	// Top directories holding kustomizations: YAML changed under them
	// looks like configuration.
	tops := map[string]bool{}
	for _, sd := range sides {
		for dir := range sd.tree.Kustomizations {
			tops[strings.SplitN(dir, "/", 2)[0]] = true
		}
	}
	var out []inventorydiff.UnreadFile
	for _, f := range files {
		if read[f] {
			continue
		}
		u := inventorydiff.UnreadFile{Path: f}
		if ext := path.Ext(f); (ext == ".yaml" || ext == ".yml" || ext == ".json") && tops[strings.SplitN(f, "/", 2)[0]] {
			u.Hint = "YAML beside the kustomizations under " + strings.SplitN(f, "/", 2)[0] + "/: something other than these overlays (a Flux Kustomization, a script) may deploy it"
		}
		out = append(out, u)
	}
	return out
}

// notListed are the directories whose files the plan takes as read: the
// overlays whose build the static reading cannot bound, and the
// kustomizations the filter (--overlays, --exclude) leaves out, which
// are not planned by choice.
func (p *planner) notListed(sides [2]*side) []string {
	var out []string
	for _, cs := range p.closures {
		for o, c := range cs {
			if !c.Bounded() {
				out = append(out, o)
			}
		}
	}
	if f := p.opts.Filter; f.On() {
		for _, sd := range sides {
			for dir := range sd.tree.Kustomizations {
				if ok, err := f.Match(dir); err == nil && !ok && !sd.overlays[dir] {
					out = append(out, dir)
				}
			}
		}
	}
	return out
}

// readOf says which of files a build reads: a closure names it, or it is
// an overlay's ResourceGroup file, which the plan reads for its
// inventory even when the build does not.
func (p *planner) readOf(sides [2]*side, files []string) map[string]bool {
	read := map[string]bool{}
	for _, f := range files {
		if path.Base(f) == inventory.ResourceGroupFile && (sides[0].overlays[path.Dir(f)] || sides[1].overlays[path.Dir(f)]) {
			read[f] = true
		}
	}
	seen := map[*closure.Closure]bool{} // the sides share most
	for _, cs := range p.closures {
		for _, c := range cs {
			if seen[c] || len(read) == len(files) {
				continue
			}
			seen[c] = true
			for _, f := range files {
				if !read[f] {
					if _, ok := slices.BinarySearch(c.Paths, f); ok {
						read[f] = true
					}
				}
			}
		}
	}
	return read
}

// isFile says whether p is a file on either side (changed also lists the
// directories whose listings changed).
func isFile(sides [2]*side, p string) bool {
	for _, sd := range sides {
		if _, ok := sd.s.Index.ID(p); ok {
			return true
		}
	}
	return false
}

func under(f string, dirs []string) bool {
	for _, d := range dirs {
		if d == "." || strings.HasPrefix(f, d+"/") {
			return true
		}
	}
	return false
}
