package deployer

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/test/gittest"
)

func TestSubmitKeepsOnlyTheNewestRequest(t *testing.T) {
	d := New([]Target{{Name: "prod"}}, nil, nil, nil, slog.New(slog.DiscardHandler))
	w := d.workers["prod"]
	steps := []struct {
		submit []Request
		want   *Request
	}{
		// Three merges while a deploy runs: only the last is deployed.
		{[]Request{{SHA: "a"}, {SHA: "b"}, {SHA: "c", PR: 3}}, &Request{SHA: "c", PR: 3}},
		// The push of a merged PR does not drop the PR's number.
		{[]Request{{SHA: "d", PR: 4}, {SHA: "d"}}, &Request{SHA: "d", PR: 4}},
		// A resync does not replace a concrete commit, nor the reverse.
		{[]Request{{SHA: "e"}, {}}, &Request{SHA: "e"}},
		{[]Request{{}, {SHA: "f"}}, &Request{SHA: "f"}},
		{[]Request{{}}, &Request{}},
		{nil, nil},
	}
	for i, s := range steps {
		for _, r := range s.submit {
			if err := d.Submit("prod", r); err != nil {
				t.Fatal(err)
			}
		}
		got := w.take()
		if (got == nil) != (s.want == nil) || (got != nil && *got != *s.want) {
			t.Errorf("step %d: took %+v, want %+v", i, got, s.want)
		}
	}
	if err := d.Submit("nope", Request{SHA: "a"}); err == nil {
		t.Error("an unknown target must be an error")
	}
}

// Remote bases are refused unless the target allows them.
func TestRemoteBasesAreOff(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "app"), 0o755)
	os.WriteFile(filepath.Join(dir, "app/kustomization.yaml"), []byte("resources:\n- https://github.com/example/config//base?ref=v1\n"), 0o644)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "remote")
	d := New(nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	_, err := d.render(context.Background(), Target{Name: "prod", Overlay: "app"}, dir, git(t, dir, "rev-parse", "HEAD"))
	if err == nil || !strings.Contains(err.Error(), "https://github.com/example/config//base?ref=v1") || !strings.Contains(err.Error(), "allowRemoteBases") {
		t.Errorf("render with a remote base: %v", err)
	}
}

var git = gittest.Git
