package test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// releaseStep is a step of .github/workflows/release.yml.
type releaseStep struct {
	ID, Name, Uses, Run string
	With                map[string]any
	Env                 map[string]string
}

// releaseWorkflow reads the release workflow: its permissions and the
// steps of its one job.
func releaseWorkflow(t *testing.T) (map[string]string, []releaseStep) {
	t.Helper()
	data, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Permissions map[string]string
		Jobs        map[string]struct{ Steps []releaseStep }
	}
	if err := sigsyaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	if len(wf.Jobs) != 1 {
		t.Fatalf("release.yml has %d jobs, want the one this test reads", len(wf.Jobs))
	}
	for _, j := range wf.Jobs {
		return wf.Permissions, j.Steps
	}
	return nil, nil
}

// Each release attests the build provenance of what it publishes (the
// archives through their checksums file, the image and the chart by
// digest, pushed beside them on ghcr.io) with GitHub's
// actions/attest-build-provenance, pinned by commit, and signs the
// chart keylessly by digest with cosign after pushing it, as the image
// is: what `gh attestation verify` and `cosign verify` check
// (docs/cli.md, docs/webhook.md). The workflow cannot run here; this
// checks that it says so.
func TestReleaseAttestsProvenanceAndSignsTheChart(t *testing.T) {
	perms, steps := releaseWorkflow(t)
	for k, v := range map[string]string{"id-token": "write", "attestations": "write", "packages": "write"} {
		if perms[k] != v {
			t.Errorf("release.yml permissions: %s is %q, want %s", k, perms[k], v)
		}
	}
	attest := regexp.MustCompile(`^actions/attest-build-provenance@[0-9a-f]{40}$`)
	index := func(ok func(releaseStep) bool) int { return slices.IndexFunc(steps, ok) }
	provenance := func(what string, with map[string]string) int {
		t.Helper()
		i := index(func(s releaseStep) bool {
			if !attest.MatchString(s.Uses) {
				return false
			}
			for k, v := range with {
				if got, _ := s.With[k].(string); got != v {
					if b, ok := s.With[k].(bool); !ok || !b || v != "true" {
						return false
					}
				}
			}
			return true
		})
		if i < 0 {
			t.Errorf("release.yml attests no provenance of %s (actions/attest-build-provenance pinned by commit, with %v)", what, with)
		}
		return i
	}
	goreleaser := index(func(s releaseStep) bool { return strings.HasPrefix(s.Uses, "goreleaser/goreleaser-action@") })
	image := index(func(s releaseStep) bool { return s.ID == "image" })
	chart := index(func(s releaseStep) bool { return s.ID == "chart" })
	if goreleaser < 0 || image < 0 || chart < 0 {
		t.Fatalf("release.yml: goreleaser step %d, image digest step %d, chart step %d", goreleaser, image, chart)
	}
	// goreleaser names the checksums file kplan_<version>_checksums.txt.
	gr, err := os.ReadFile("../.goreleaser.yaml")
	if err != nil || !strings.Contains(string(gr), `name_template: "{{ .ProjectName }}_{{ .Version }}_checksums.txt"`) || !strings.Contains(string(gr), "project_name: kplan\n") {
		t.Errorf(".goreleaser.yaml no longer names the checksums file kplan_<version>_checksums.txt, which release.yml attests: %v", err)
	}
	archives := provenance("the archives", map[string]string{"subject-checksums": "dist/kplan_${{ steps.version.outputs.version }}_checksums.txt"})
	img := provenance("the image", map[string]string{"subject-name": "ghcr.io/kplan-dev/kplan", "subject-digest": "${{ steps.image.outputs.digest }}", "push-to-registry": "true"})
	ch := provenance("the chart", map[string]string{"subject-name": "ghcr.io/kplan-dev/charts/kplan-webhook", "subject-digest": "${{ steps.chart.outputs.digest }}", "push-to-registry": "true"})
	if archives >= 0 && archives < goreleaser || img >= 0 && img < image || ch >= 0 && ch < chart {
		t.Errorf("release.yml attests before building: goreleaser %d, archives' provenance %d; image digest %d, its provenance %d; chart %d, its provenance %d",
			goreleaser, archives, image, img, chart, ch)
	}
	if !strings.Contains(steps[image].Run, `echo "digest=$digest" >> "$GITHUB_OUTPUT"`) || !strings.Contains(steps[image].Run, `select(.type == "Docker Manifest")`) {
		t.Errorf("the image digest step does not output the manifest list's digest:\n%s", steps[image].Run)
	}
	if run := steps[chart].Run; !strings.Contains(run, "set -o pipefail") || !strings.Contains(run, `awk '$1 == "Digest:" { print $2 }'`) || !strings.Contains(run, `echo "digest=$digest" >> "$GITHUB_OUTPUT"`) {
		t.Errorf("the chart step does not output the pushed chart's digest (or a failed push would pass through tee):\n%s", run)
	}
	sign := index(func(s releaseStep) bool {
		return strings.Contains(s.Run, `cosign sign --yes "ghcr.io/kplan-dev/charts/kplan-webhook@$DIGEST"`) && s.Env["DIGEST"] == "${{ steps.chart.outputs.digest }}"
	})
	installer := index(func(s releaseStep) bool { return strings.HasPrefix(s.Uses, "sigstore/cosign-installer@") })
	if sign < 0 || sign < chart || installer < 0 || installer > sign {
		t.Errorf("release.yml does not sign the pushed chart by digest with cosign (installer %d, chart %d, sign %d)", installer, chart, sign)
	}
}
