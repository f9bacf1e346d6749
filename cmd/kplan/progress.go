package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/kplan-dev/kplan/internal/plan"
)

// progressAfter is how long a plan runs before it shows progress: a
// short one prints nothing.
const progressAfter = 500 * time.Millisecond

// progress returns a plan's progress callback for stderr: "rendered N of
// M" on one line, rewritten in place, when stderr is a terminal and the
// plan is long; nil otherwise (a pipe or a CI log gets no such lines).
func progress(stderr io.Writer) func(done, total int) {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressLine(stderr, time.Now)
}

// progressLine writes the progress line at most every tenth of a second
// once the plan has run progressAfter, and clears it when the last build
// is done.
func progressLine(w io.Writer, now func() time.Time) func(done, total int) {
	start, last, shown := now(), time.Time{}, false
	return func(done, total int) {
		t := now()
		if done == total {
			if shown {
				fmt.Fprint(w, "\r\033[K")
			}
			return
		}
		if t.Sub(start) < progressAfter || t.Sub(last) < 100*time.Millisecond {
			return
		}
		last, shown = t, true
		fmt.Fprintf(w, "\r\033[Kkplan: rendered %d of %d overlay builds", done, total)
	}
}

// stderrFilterKey carries main's stderr filter to the commands that
// report kustomize's warnings themselves.
type stderrFilterKey struct{}

// reportKustomizeWarnings tells main's stderr filter that the command's
// report shows kustomize's deprecation warnings, as notes naming each
// file, so the raw lines krusty prints are left out.
func reportKustomizeWarnings(ctx context.Context) {
	if f, ok := ctx.Value(stderrFilterKey{}).(*plan.StderrFilter); ok && f != nil {
		f.Drop.Store(true)
	}
}
