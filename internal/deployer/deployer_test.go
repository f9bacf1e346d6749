package deployer

import (
	"log/slog"
	"testing"
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
