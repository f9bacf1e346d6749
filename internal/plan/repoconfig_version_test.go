package plan

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// An unversioned .kplan.yaml on the head commit still plans, and the log
// (the Action's runner log) says to add apiVersion and kind; a versioned
// one plans without the warning.
func TestUnversionedRepoConfigWarns(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		warns      bool
	}{
		{"unversioned", "targets: [{name: prod, overlay: app}]\n", true},
		{"versioned", "apiVersion: kplan.dev/v1alpha1\nkind: Repository\ntargets: [{name: prod, overlay: app}]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			write(t, dir, map[string]string{"app/kustomization.yaml": "resources: [cm.yaml]\n", "app/cm.yaml": cm("a", "k: v")})
			base := commit(t, dir, "base")
			write(t, dir, map[string]string{"app/cm.yaml": cm("a", "k: w"), ".kplan.yaml": tc.head})
			head := commit(t, dir, "head")
			var log bytes.Buffer
			p, err := Run(t.Context(), Options{RepoDir: dir, Base: base, Head: head, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Overlays) != 1 || p.Overlays[0].Status != "changed" {
				t.Fatalf("overlays = %+v, want the one target changed", p.Overlays)
			}
			warned := strings.Contains(log.String(), `level=WARN msg=".kplan.yaml has no apiVersion and kind: reading it as kplan.dev/v1alpha1 Repository`)
			if warned != tc.warns {
				t.Errorf("warned = %v, want %v; log:\n%s", warned, tc.warns, log.String())
			}
		})
	}
}
