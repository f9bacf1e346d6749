package test

import (
	"os"
	"regexp"
	"strings"
	"testing"
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
