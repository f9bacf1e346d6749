package deployer

import (
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
)

// statusLog records what a Status is told.
type statusLog struct {
	mu   sync.Mutex
	told []string
}

func (s *statusLog) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, line)
}

func (s *statusLog) Activity(t Target, a Activity, reason string) {
	s.add(t.Key() + " " + string(a) + ": " + reason)
}
func (s *statusLog) Runs(t Target, st deploy.State) { s.add(t.Key() + " runs " + st.SHA) }
func (s *statusLog) Finished(o Outcome)             { s.add(o.Target.Key() + " finished " + o.SHA) }
func (s *statusLog) Retired(t Target)               { s.add(t.Key() + " retired") }

// The status is told, in order, what a target does: a request queued
// (with its change, in the forge's words), the deploy taking it, a newer
// one arriving meanwhile queued only once the deploy ends, then idle.
func TestStatusIsToldWhatTargetsDo(t *testing.T) {
	s := &statusLog{}
	prod := named("prod")
	prod.Forge = config.GitLab
	d := New([]Target{prod}, nil, nil, nil, slog.New(slog.DiscardHandler))
	d.Status = s
	w := d.workers["prod"]
	d.Submit("prod", Request{SHA: "aaaaaaa111", PR: 12})
	d.taken(w, w.take())
	d.Submit("prod", Request{SHA: "bbbbbbb222"})
	d.Submit("prod", Request{}) // a resync does not replace it
	d.done(w)
	d.taken(w, w.take())
	d.done(w)
	d.Submit("prod", Request{})
	want := []string{
		"prod queued: commit aaaaaaa of !12 waits for a deploy slot",
		"prod deploying: commit aaaaaaa of !12",
		"prod queued: commit bbbbbbb waits for a deploy slot",
		"prod deploying: commit bbbbbbb",
		"prod idle: ",
		"prod queued: the branch's tip (resync) waits for a deploy slot",
	}
	if !slices.Equal(s.told, want) {
		t.Errorf("told\n%q\nwant\n%q", s.told, want)
	}
}
