package main

import (
	"fmt"
	"strings"
	"testing"
)

// sizeRepo's one overlay changes 60 ConfigMaps, each rewriting a text of
// 20 lines: about 80 KB of field changes, past GitHub's 64 KB comment.
func sizeRepo(t *testing.T) string {
	cm := func(i int, v string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-%02d\ndata:\n  app.conf: |\n", i)
		for l := range 20 {
			fmt.Fprintf(&b, "    setting-%02d %s-%02d-%02d\n", l, v, i, l)
		}
		return b.String()
	}
	var base, head strings.Builder
	for i := range 60 {
		base.WriteString(cm(i, "old-value"))
		head.WriteString(cm(i, "new-value"))
	}
	return commitRepo(t,
		map[string]string{"app/kustomization.yaml": "namespace: app\nresources: [cms.yaml]\n", "app/cms.yaml": base.String()},
		map[string]string{"app/cms.yaml": head.String()})
}

// kplan diff -o markdown prints the whole report: it dropped every field
// change of a plan past GitHub's comment limit and told the person
// running kplan diff to "run kplan diff locally". --max-bytes fits it
// when asked, and says so.
func TestCLIMarkdownKeepsEveryFieldChangeUnlessMaxBytes(t *testing.T) {
	t.Chdir(sizeRepo(t))
	out, stderr, err := kplan(t, nil, "diff", "--base", "main~1", "--head", "main", "-o", "markdown")
	if err != nil {
		t.Fatalf("kplan diff -o markdown: %v %s", err, stderr)
	}
	if len(out) <= 65536 {
		t.Fatalf("the report is %d bytes: the test needs one past GitHub's limit", len(out))
	}
	for i := range 60 {
		if want := fmt.Sprintf("+      setting-19 new-value-%02d-19\n", i); !strings.Contains(out, want) {
			t.Fatalf("the CLI's Markdown (%d bytes) lacks conf-%02d's field change %q", len(out), i, want)
		}
	}
	if strings.Contains(out, "[!NOTE]") || strings.Contains(out, "locally") {
		t.Errorf("the whole report says something is left out:\n%.1500s", out)
	}

	fitted, stderr, err := kplan(t, nil, "diff", "--base", "main~1", "--head", "main", "-o", "markdown", "--max-bytes", "65536")
	if err != nil {
		t.Fatalf("kplan diff --max-bytes: %v %s", err, stderr)
	}
	if len(fitted) > 65536 || !strings.Contains(fitted, "not in this report (--max-bytes 65536): print it without --max-bytes for them") {
		t.Errorf("--max-bytes 65536: %d bytes:\n%.1500s", len(fitted), fitted)
	}
	if _, _, err := kplan(t, nil, "diff", "--base", "main~1", "--head", "main", "--max-bytes", "1000"); err == nil || !strings.Contains(err.Error(), "-o markdown") {
		t.Errorf("--max-bytes with text output: %v, want an error saying it bounds markdown only", err)
	}
}
