package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// Every image kplan ships builds FROM a base pinned by digest (a tag can be
// moved under a release), installs git (kplan reads commits with it) and
// runs as a non-root user.
func TestImagesPinBaseByDigestWithGitNonRoot(t *testing.T) {
	from := regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)`)
	digest := regexp.MustCompile(`^[a-z0-9./_-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$`)
	for _, name := range []string{"../Dockerfile", "../Dockerfile.release"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		froms := from.FindAllStringSubmatch(text, -1)
		if len(froms) == 0 {
			t.Errorf("%s: no FROM", name)
		}
		for _, m := range froms {
			if !digest.MatchString(m[1]) {
				t.Errorf("%s: FROM %s is not pinned by digest (name:tag@sha256:<64 hex>)", name, m[1])
			}
		}
		if !strings.Contains(text, "install -y --no-install-recommends git") {
			t.Errorf("%s: the image does not install git", name)
		}
		users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(text, -1)
		if len(users) == 0 || users[len(users)-1][1] == "root" || users[len(users)-1][1] == "0" {
			t.Errorf("%s: the final stage runs as root", name)
		}
	}
}

// Both images (the one `docker build .` makes and the released one) have
// one entry point: the README's image ran kplan-action, the release's
// kplan.
func TestImagesShareOneEntryPoint(t *testing.T) {
	entry := regexp.MustCompile(`(?m)^ENTRYPOINT\s+(.+)$`)
	var got []string
	for _, name := range []string{"../Dockerfile", "../Dockerfile.release"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m := entry.FindAllStringSubmatch(string(data), -1)
		if len(m) != 1 {
			t.Fatalf("%s: %d ENTRYPOINTs", name, len(m))
		}
		got = append(got, strings.TrimSpace(m[0][1]))
	}
	if got[0] != got[1] || got[0] != `["/usr/local/bin/kplan"]` {
		t.Errorf("entry points %q: want both [\"/usr/local/bin/kplan\"]", got)
	}
}

// What an install pulls exists on release day: the release pushes vX.Y.Z
// and the series tags vX.Y and vX; deploy/ pins the exact release, which
// the release workflow checks against its tag; the chart, packaged with
// the tag's version as appVersion, pulls v<appVersion>. deploy/ pulled
// v1, a tag the release never pushed (ImagePullBackOff).
func TestInstallsPullTagsTheReleasePushes(t *testing.T) {
	var gr struct {
		Dockers []struct {
			Images []string
			Tags   []string
		} `json:"dockers_v2"`
	}
	data, err := os.ReadFile("../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &gr); err != nil || len(gr.Dockers) != 1 {
		t.Fatalf(".goreleaser.yaml: %v %+v", err, gr)
	}
	tags := strings.Join(gr.Dockers[0].Tags, "\n")
	for _, want := range []string{"v{{ .Version }}", "v{{ .Major }}.{{ .Minor }}", "v{{ .Major }}"} {
		if !strings.Contains(tags, want) {
			t.Errorf("the release does not push %s: tags %q", want, gr.Dockers[0].Tags)
		}
	}
	if img := deployImage(t); img.NewName != gr.Dockers[0].Images[0] || !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(img.NewTag) {
		t.Errorf("deploy/ pulls %s:%s: want %s at the exact release (vX.Y.Z)", img.NewName, img.NewTag, gr.Dockers[0].Images[0])
	}
	release, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`awk '$1 == "newTag:" { print $2 }' deploy/base/kustomization.yaml`, `if [ "$pinned" != "$TAG" ]`, `version="${TAG#v}"`, `package charts/kplan-webhook --version "$version" --app-version "$version"`, "push ", "gh release upload"} {
		if !strings.Contains(string(release), want) {
			t.Errorf("release.yml does not publish the chart with the release's version (%q)", want)
		}
	}
	values, err := os.ReadFile("../charts/kplan-webhook/templates/_helpers.tpl")
	if err != nil || !strings.Contains(string(values), `default (printf "v%s" .Chart.AppVersion)`) {
		t.Errorf("the chart's image tag does not default to v<appVersion>: %v", err)
	}
}

// The GitLab component runs the image of its own release: its image
// input defaults to the release deploy/ pins (which the release workflow
// checks against its tag, as it checks the component's), and the docs
// include the component at that release. It ran :latest whatever
// version was included, and the docs included v1.2.0, which does not
// exist.
func TestGitLabComponentPinsItsRelease(t *testing.T) {
	release := deployImage(t).NewTag
	comp, err := os.ReadFile("../templates/kplan-plan.yml")
	if err != nil {
		t.Fatal(err)
	}
	// The component's spec is the first document; its inputs' defaults.
	spec, _, _ := strings.Cut(string(comp), "\n---\n")
	var c struct {
		Spec struct {
			Inputs map[string]struct{ Default any }
		}
	}
	if err := sigsyaml.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Spec.Inputs["image"].Default, "ghcr.io/kplan-dev/kplan:"+release; got != want {
		t.Errorf("the component's image defaults to %v, want %s (the release deploy/ pins)", got, want)
	}
	docs, err := os.ReadFile("../docs/gitlab.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`kplan-plan@(v[0-9.]+)`).FindAllStringSubmatch(string(docs), -1) {
		if m[1] != release {
			t.Errorf("docs/gitlab.md includes the component at %s, want %s (the release deploy/ pins)", m[1], release)
		}
	}
	wf, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(wf), "templates/kplan-plan.yml::the component runs") {
		t.Error("release.yml does not check the component's image against the tag")
	}
}

// A release's notes are its CHANGELOG.md section (scripts/release-notes.sh,
// which release.yml hands goreleaser), and a tag with no section fails
// the release instead of publishing every commit subject since the start.
func TestReleaseNotesComeFromTheChangelog(t *testing.T) {
	dir := t.TempDir()
	cl := filepath.Join(dir, "CHANGELOG.md")
	os.WriteFile(cl, []byte("# Changelog\n\n## [Unreleased]\n\n- next\n\n## [1.2.0] - 2026-12-01\n\n### Added\n\n- a thing\n\n## [1.1.0] - 2026-11-01\n\n- old\n"), 0o644)
	out, err := exec.Command("../scripts/release-notes.sh", "v1.2.0", cl).Output()
	if err != nil || strings.TrimSpace(string(out)) != "### Added\n\n- a thing" {
		t.Errorf("notes of v1.2.0: %v\n%s", err, out)
	}
	out, err = exec.Command("../scripts/release-notes.sh", "v1.3.0", cl).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `no section "## [1.3.0]"`) {
		t.Errorf("a tag with no section: %v\n%s", err, out)
	}
	wf, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(wf), `scripts/release-notes.sh "$TAG" > "$RUNNER_TEMP/release-notes.md"`) || !strings.Contains(string(wf), "--release-notes ${{ runner.temp }}/release-notes.md") {
		t.Error("release.yml does not hand goreleaser the CHANGELOG section")
	}
}

// deployImage is the one image deploy/ pulls: what a release pins.
func deployImage(t *testing.T) struct{ Name, NewName, NewTag string } {
	t.Helper()
	var kust struct {
		Images []struct{ Name, NewName, NewTag string }
	}
	data, err := os.ReadFile("../deploy/base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &kust); err != nil || len(kust.Images) != 1 {
		t.Fatalf("deploy/base/kustomization.yaml images: %v %+v", err, kust)
	}
	return kust.Images[0]
}
