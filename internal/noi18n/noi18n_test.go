package noi18n

import (
	"testing"

	"k8s.io/kubectl/pkg/util/i18n"
)

// kubectl's texts that reach kplan's users (its errors through cli-utils)
// read as written, untranslated.
func TestKubectlTextsReadAsWritten(t *testing.T) {
	for _, s := range []string{"Print the supported API resources on the server", "error: %s"} {
		if got := i18n.T(s); got != s {
			t.Errorf("i18n.T(%q) = %q", s, got)
		}
	}
	if got := i18n.T("%d resource", 2); got != "2 resource" {
		t.Errorf("plural: %q", got)
	}
}
