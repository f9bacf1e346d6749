package deployer

import (
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kplan-dev/kplan/internal/snapshot"
)

// remoteBase returns the first remote resource, base or component that the
// overlay at dir reaches through local kustomizations, or "". A deploy must
// not depend on what another server returns at that moment unless the
// config allows it.
func remoteBase(fSys filesys.FileSystem, dir string) string {
	seen := map[string]bool{}
	var walk func(dir string) string
	walk = func(dir string) string {
		if seen[dir] {
			return ""
		}
		seen[dir] = true
		for _, name := range konfig.RecognizedKustomizationFileNames() {
			data, err := fSys.ReadFile(snapshot.Abs(path.Join(dir, name)))
			if err != nil {
				continue
			}
			var k struct {
				Resources  []string `json:"resources"`
				Bases      []string `json:"bases"`
				Components []string `json:"components"`
			}
			if yaml.Unmarshal(data, &k) != nil {
				return "" // the render reports the broken file
			}
			for _, r := range append(append(k.Resources, k.Bases...), k.Components...) {
				if isRemote(r) {
					return r
				}
				if fSys.IsDir(snapshot.Abs(path.Join(dir, r))) {
					if ref := walk(path.Join(dir, r)); ref != "" {
						return ref
					}
				}
			}
			return ""
		}
		return ""
	}
	return walk(dir)
}

// isRemote matches what kustomize's loader fetches from elsewhere.
func isRemote(r string) bool {
	return strings.Contains(r, "://") || strings.HasPrefix(r, "git@") ||
		strings.HasPrefix(r, "github.com/") || strings.HasPrefix(r, "gitlab.com/") ||
		strings.Contains(r, "?ref=") || strings.Contains(r, ".git//")
}
