package plan

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
)

// kustomizeWarning is a line krusty prints to the process's stderr as it
// loads a kustomization with a deprecated field ("# Warning: 'bases' is
// deprecated. ..."); a plan reports these as notes on the overlays whose
// files have them (see notes.go).
var kustomizeWarning = regexp.MustCompile(`^# Warning: '[A-Za-z0-9]+' is deprecated\. `)

// StderrFilter stands in for the process's stderr while kustomize runs:
// krusty writes its deprecation warnings straight to os.Stderr, naming
// no file, once per overlay, side and base (28 lines on a kubeflow
// plan). Lines pass through to the real stderr, except those warnings
// while Drop is set (a plan reports them, once per file, instead).
type StderrFilter struct {
	// Drop says the warnings are reported elsewhere: leave them out.
	Drop atomic.Bool
	real *os.File
	w    *os.File
	done sync.WaitGroup
}

// FilterStderr replaces os.Stderr with a filter in front of it and
// returns it, with the real stderr for the program's own writes (its
// log, its errors). Close puts the real one back. It is for mains: it
// changes process-wide state, because that is where kustomize writes.
func FilterStderr() (*StderrFilter, *os.File, error) {
	real := os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		return nil, real, err
	}
	f := &StderrFilter{real: real, w: w}
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		f.copy(r)
		r.Close()
	}()
	os.Stderr = w
	return f, real, nil
}

// QuietKustomize is FilterStderr for a main whose plans report
// kustomize's warnings themselves (the Action, the GitLab job): the
// warnings are dropped from the log; when the filter cannot stand, that
// is said and they show raw. close puts the real stderr back.
func QuietKustomize() (stderr io.Writer, close func()) {
	filter, real, err := FilterStderr()
	if err != nil {
		fmt.Fprintln(real, "kplan: kustomize's warnings will show raw:", err)
		return real, func() {}
	}
	filter.Drop.Store(true)
	return real, filter.Close
}

func (f *StderrFilter) copy(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1<<20)
	for s.Scan() {
		line := s.Text()
		if f.Drop.Load() && kustomizeWarning.MatchString(line) {
			continue
		}
		f.real.WriteString(line + "\n")
	}
	// A line too long to scan: pass the rest through as it is.
	io.Copy(f.real, r)
}

// Close restores the real stderr once everything written is through.
func (f *StderrFilter) Close() {
	if f == nil {
		return
	}
	os.Stderr = f.real
	f.w.Close()
	f.done.Wait()
}
