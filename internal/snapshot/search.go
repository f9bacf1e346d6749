package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/kplan-dev/kplan/internal/gitcli"
)

// SearchYAML searches every YAML file of a commit's tree for needles with
// git grep, and remembers by content what it found, for Containing and
// ContainingEach to answer without reading the contents: git reads and
// searches them in its own process, which costs a fraction of moving every
// content through a pipe to search it here (detection searches a whole
// tree, most of which no plan reads). Files over MaxFileSize hold nothing,
// as for Containing. A snapshot of a work tree, a tree with fewer than
// atLeast contents not searched yet (reading a few through the batch costs
// less than a process), or one whose YAML files are mostly copies of each
// other, is left to Containing.
func (s *Snapshot) SearchYAML(ctx context.Context, atLeast int, needles ...string) error {
	if s.Rev == WorkingTree || s.blobs.repoDir == "" || s.tree == nil || len(needles) == 0 {
		return nil
	}
	all := map[string]bool{}
	byPath := map[string]string{}
	for p, id := range s.tree.files {
		if IsYAML(p) {
			all[id] = true
			byPath[p] = id
		}
	}
	if s.blobs.unsearched(all, needles) < max(atLeast, 1) {
		return nil
	}
	if len(all)*5 < len(byPath)*4 {
		// git grep searches each path: on a tree holding the same files
		// many times (copies of an application) reading each content once
		// costs less.
		return nil
	}
	// git grep -o would not show a needle inside or across another's
	// match: it lists the files holding any (-l), and the few listed are
	// read and searched for each needle here.
	args := []string{"-c", "grep.fullName=false", "-c", "color.grep=never", "grep", "-l", "-a", "-z", "-F", "--threads=1"}
	for _, n := range needles {
		args = append(args, "-e", n)
	}
	args = append(args, s.Rev, "--", "*.yaml", "*.yml")
	out, err := gitcli.Repo{Dir: s.blobs.repoDir}.Run(ctx, args...)
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: nothing found
		return fmt.Errorf("search the YAML of %s: %w", s.Rev, err)
	}
	var listed []string
	prefix := s.Rev + ":"
	for _, name := range bytes.Split(out, []byte{0}) {
		if p, ok := strings.CutPrefix(string(name), prefix); ok {
			if id, inTree := byPath[p]; inTree {
				listed = append(listed, id)
			}
		}
	}
	data, err := s.blobs.get(ctx, listed)
	if err != nil {
		return fmt.Errorf("search the YAML of %s: %w", s.Rev, err)
	}
	holding := make([]map[string]bool, len(needles))
	for i, n := range needles {
		holding[i] = map[string]bool{}
		for _, id := range listed {
			// A content over MaxFileSize is not held: it holds nothing.
			if d := data[id]; d != nil && bytes.Contains(d, []byte(n)) {
				holding[i][id] = true
			}
		}
	}
	s.blobs.searched(needles, all, holding)
	return nil
}
