package approval

import (
	"context"
	"path"
	"strings"
)

// Scope is what a target reads: the rule asks it whether two trees
// differ for the target, given the paths that differ between them. The
// webhook plugs in the target's closure and render comparison
// (internal/deployer's targetScope); WholeTree and Dir are the simple
// ones.
type Scope interface {
	// Differs says whether trees a and b, which differ in paths (none
	// empty), differ in what the target reads.
	Differs(ctx context.Context, a, b string, paths []string) (bool, error)
	// String names the scope in verdicts.
	String() string
}

// WholeTree is a target that reads every file.
type WholeTree struct{}

// Differs implements Scope.
func (WholeTree) Differs(_ context.Context, _, _ string, paths []string) (bool, error) {
	return len(paths) > 0, nil
}

func (WholeTree) String() string { return "the whole tree" }

// Dir is a target that reads the files under one directory (kplan
// approval --target: an overlay's own directory, not its bases; the
// webhook uses the overlay's full closure).
type Dir string

// Differs implements Scope.
func (d Dir) Differs(_ context.Context, _, _ string, paths []string) (bool, error) {
	dir := path.Clean(strings.Trim(string(d), "/"))
	if dir == "." || dir == "" {
		return len(paths) > 0, nil
	}
	for _, p := range paths {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true, nil
		}
	}
	return false, nil
}

func (d Dir) String() string { return string(d) + "/" }
