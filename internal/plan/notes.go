package plan

import (
	"context"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	sigsyaml "sigs.k8s.io/yaml"
)

// notes finds what kustomize warns about an overlay's kustomizations:
// deprecated fields. krusty prints these straight to the process's
// stderr as it loads each file, naming no file, once per overlay, side
// and base; a plan reads them from the files instead, so each is shown
// once on the overlay it concerns, naming the file, and whether the build
// ran or came from the cache.
type notes struct {
	ctx   context.Context
	sd    *side
	files map[string][]string // kustomization file → its warnings
}

func newNotes(ctx context.Context, sd *side) *notes {
	return &notes{ctx: ctx, sd: sd, files: map[string][]string{}}
}

// overlay returns the warnings of every kustomization the overlay's build
// reads, each as "FILE: warning".
func (n *notes) overlay(overlay string) []string {
	var out []string
	for _, p := range n.sd.closures.Overlay(overlay).Paths {
		if !isKustomizationFile(p) {
			continue
		}
		ws, ok := n.files[p]
		if !ok {
			ws = n.read(p)
			n.files[p] = ws
		}
		for _, w := range ws {
			out = append(out, p+": "+w)
		}
	}
	return out
}

func isKustomizationFile(p string) bool {
	base := path.Base(p)
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if base == name {
			return true
		}
	}
	return false
}

// read returns a kustomization file's deprecation warnings, worded as
// kustomize words them without its "# Warning: " prefix. A file that is
// absent or does not parse has none here: its render says what is wrong.
func (n *notes) read(p string) []string {
	data, err := n.sd.s.ReadFile(n.ctx, p)
	if err != nil {
		return nil
	}
	// Not strict: kplan's inventory field is not kustomize's. The overlay
	// rendered, so its files passed the render's alias bounds.
	var k types.Kustomization
	if sigsyaml.Unmarshal(data, &k) != nil {
		return nil
	}
	ws := k.CheckDeprecatedFields()
	if ws == nil {
		return nil
	}
	out := make([]string, 0, len(*ws))
	for _, w := range *ws {
		out = append(out, strings.TrimPrefix(w, "# Warning: "))
	}
	return out
}
