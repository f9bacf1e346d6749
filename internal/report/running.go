package report

import (
	"fmt"
	"strings"
)

// Running is a target whose cluster runs another commit than the plan's
// base: the deploy of the merge starts from what runs, so it needs more
// approved than the plan shows (the webhook applies a commit only if
// every change since what runs was approved: internal/approval). The PR
// flow reads it from the forge's deploy records (internal/prflow).
type Running struct {
	Target string // the target's name
	SHA    string // the commit its last successful deploy applied
	Branch string // the branch the change merges into
	// History is how SHA stands to Branch's first-parent history up to
	// the plan's base: Behind it by Commits commits, Apart from it, or
	// Merged into it.
	History History
	Commits int
}

// History is how a running commit stands to the branch's history.
type History string

const (
	// Behind: on the branch's first-parent history, Running.Commits
	// commits before the plan's base.
	Behind History = "behind"
	// Apart: not in the branch's history (a force-push rewrote it).
	Apart History = "apart"
	// Merged: in the branch's history only through a merge's other
	// parent.
	Merged History = "merged"
)

// sentence says it for a reader; code marks names and commits as code.
func (r Running) sentence(code func(string) string) string {
	s := "target " + code(r.Target) + ": the cluster runs " + code(shortRev(r.SHA))
	refused := ": the deploy will be refused where the two differ, unless a user with write access overrides it"
	switch r.History {
	case Behind:
		return s + fmt.Sprintf(", %d %s behind %s: the deploy needs %s approved too", r.Commits, plural(r.Commits, "commit", "commits"), code(r.Branch), plural(r.Commits, "it", "those"))
	case Merged:
		return s + ", which " + code(r.Branch) + "'s first-parent history reaches only through a merge" + refused
	}
	return s + ", which is not in " + code(r.Branch) + "'s history" + refused
}

// writeRunning notes, near the top of the Markdown, each target whose
// cluster does not run the plan's base.
func writeRunning(b *strings.Builder, runs []Running) {
	if len(runs) == 0 {
		return
	}
	b.WriteString("> [!NOTE]\n")
	if len(runs) == 1 {
		b.WriteString("> " + capital(runs[0].sentence(inline)) + ".\n\n")
		return
	}
	for _, r := range runs {
		b.WriteString("> - " + capital(r.sentence(inline)) + "\n")
	}
	b.WriteString("\n")
}

// textRunning is writeRunning for the terminal.
func textRunning(ew *errWriter, runs []Running) {
	for _, r := range runs {
		ew.printf("Note: %s.\n", r.sentence(func(s string) string { return s }))
	}
	if len(runs) > 0 {
		ew.printf("\n")
	}
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
