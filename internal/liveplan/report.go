package liveplan

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Marker identifies the live plan's sticky comment, beside the plan's
// (markers.PlanMarker) and the deploy reports.
const Marker = "<!-- kplan:live -->"

// cutRoom is what a cut comment keeps free under the forge's limit for
// the note that it was cut.
const cutRoom = 1000

// maxFields bounds the field changes shown per object.
const maxFields = 30

// Markdown is the live plan comment, whole: CommentPoster fits it in the
// forge's limit (Fit).
func Markdown(p *PullPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n### kplan live plan: what merging `%s` into `%s` would do to the clusters now\n\n", Marker, short(p.Head), p.Base)
	if len(p.Targets) == 0 {
		b.WriteString("No target of this branch renders an overlay at this commit.\n")
	}
	for _, t := range p.Targets {
		target(&b, t)
	}
	fmt.Fprintf(&b, "\n<sub>Server-side dry-run of apply and prune against each target's cluster at %s; the pull request's content rendered with remote resources off. Took %.1f s. Updated on every push.</sub>\n", short(p.Head), p.Took.Seconds())
	return b.String()
}

// Fit cuts a live plan comment to maxChars characters (the forge's
// MaxCommentChars), at the end of a line, saying it was cut; it never
// cuts a character in two.
func Fit(s string, maxChars int) string {
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	s = forge.CutChars(s, maxChars-cutRoom)
	if i := strings.LastIndex(s, "\n"); i > 0 {
		s = s[:i]
	}
	return s + "\n\n…the live plan is too long for a comment and was cut here (the webhook's log has it whole).\n"
}

func target(b *strings.Builder, t TargetPlan) {
	fmt.Fprintf(b, "#### %s (`%s`)\n\n", t.Target, t.Overlay)
	if t.Err != "" {
		fmt.Fprintf(b, "❌ No live plan: %s\n\n", oneLine(t.Err))
		return
	}
	r := t.Result
	counts := []string{}
	for _, a := range []struct {
		a    Action
		verb string
	}{{Create, "to create"}, {Configure, "to configure"}, {Unchanged, "unchanged"}, {Prune, "to prune"}, {Keep, "left in the cluster"}} {
		if n := r.Count(a.a); n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, a.verb))
		}
	}
	if len(counts) == 0 {
		counts = append(counts, "no objects")
	}
	deployed := "nothing deployed yet"
	if t.DeployedSHA != "" {
		deployed = "deployed: `" + short(t.DeployedSHA) + "`"
	}
	drifted, findings := r.Drifted(), r.Findings()
	fmt.Fprintf(b, "%s · %d drifted · %d refused · %s · inventory %s\n\n", strings.Join(counts, ", "), len(drifted), len(findings), deployed, r.Inventory)
	if r.Refused != "" {
		// Before the rows: none of them happens.
		fmt.Fprintf(b, "⛔ **The deploy will refuse: %s**\n\nNothing below is applied while it does.\n\n", oneLine(r.Refused))
	}
	if len(findings) > 0 {
		b.WriteString("⛔ **Refused** (the API server's own answer to a dry-run: the merge's apply of these objects fails)\n\n| Object | Finding | Message |\n|---|---|---|\n")
		for _, f := range findings {
			fmt.Fprintf(b, "| %s | `%s` | %s |\n", inventorydiff.Name(f.Key), f.Kind, cell(f.Message))
		}
		b.WriteString("\n")
	}
	if len(drifted) > 0 {
		fmt.Fprintf(b, "⚠️ **Drift**: live objects that differ from what the deployed commit `%s` renders, which this pull request does not change; apply would undo these changes\n\n", short(t.DeployedSHA))
		for _, row := range drifted {
			fmt.Fprintf(b, "- %s%s\n", inventorydiff.Name(row.Key), fieldBlock(row))
		}
		b.WriteString("\n")
	} else if t.DriftNote != "" {
		fmt.Fprintf(b, "Drift not checked: %s.\n\n", oneLine(t.DriftNote))
	}
	b.WriteString("| Action | Object | Changes to live |\n|---|---|---|\n")
	for _, row := range r.Rows {
		mark := string(row.Action)
		switch {
		case row.Finding != nil:
			mark = "⛔ " + mark
		case row.Drift:
			mark = "⚠️ " + mark + " (drift)"
		}
		var what string
		switch {
		case row.Note != "":
			what = row.Note
		case len(row.Fields) > 0:
			what = fmt.Sprintf("%d field(s)", len(row.Fields))
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", mark, inventorydiff.Name(row.Key), cell(what))
	}
	b.WriteString("\n")
	var changed []Row
	for _, row := range r.Rows {
		if len(row.Fields) > 0 && !row.Drift {
			changed = append(changed, row)
		}
	}
	if len(changed) > 0 {
		b.WriteString("<details><summary>Field changes against live</summary>\n\n")
		for _, row := range changed {
			fmt.Fprintf(b, "- %s%s\n", inventorydiff.Name(row.Key), fieldBlock(row))
		}
		b.WriteString("\n</details>\n\n")
	}
}

// fieldBlock is a row's field changes as an indented diff block.
func fieldBlock(row Row) string {
	if len(row.Fields) == 0 {
		if row.Action == Create {
			return ": deleted from the cluster; apply creates it again"
		}
		return ""
	}
	var b strings.Builder
	b.WriteString("\n  ```diff\n")
	for i, f := range row.Fields {
		if i == maxFields {
			fmt.Fprintf(&b, "  # …and %d more\n", len(row.Fields)-maxFields)
			break
		}
		for _, l := range strings.Split(f.String(), "\n") {
			b.WriteString("  " + strings.ReplaceAll(l, "```", "ˋˋˋ") + "\n")
		}
	}
	b.WriteString("  ```")
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell escapes a table cell.
func cell(s string) string {
	s = oneLine(s)
	if cut := forge.CutChars(s, 600); len(cut) < len(s) {
		s = cut + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

// CommentPoster posts the live plan as a sticky comment (Marker) among
// the token's own comments, through the forge's Commenter, fitted in the
// limit of the forge that holds the repository.
type CommentPoster struct {
	Comments forge.Commenter
	// MaxChars is the comment limit, in characters, of repo's forge
	// (github.MaxCommentChars, gitlab.MaxCommentChars).
	MaxChars func(repo string) int
}

// Post implements Poster.
func (g CommentPoster) Post(ctx context.Context, repo string, pr int, body string) error {
	if _, err := g.Comments.Upsert(ctx, repo, pr, Marker, Fit(body, g.MaxChars(repo))); err != nil {
		return fmt.Errorf("live plan comment on %s#%d: %w", repo, pr, err)
	}
	return nil
}
