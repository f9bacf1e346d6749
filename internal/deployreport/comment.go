// Package deployreport is what a deploy's reports say, whichever forge
// shows them: the comment summarising a merge's deploy (Comment), a
// target's outcome in a line (Counts), and messages cleared of where the
// cluster lives (Public), and the Outbox that sends them, holding what
// the forge does not take yet. The forges' deploy reporters
// (internal/forge/github/deploys, internal/forge/gitlab/deploys) send
// them; this package speaks to no forge.
package deployreport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/config"
	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/deployer"
	"github.com/kplan-dev/kplan/internal/forge"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
)

// Marker finds the deploy comment on a pull request or merge request.
const Marker = "<!-- kplan:deploy -->"

// Interrupted is what an interrupted deploy's statuses say.
const Interrupted = "interrupted: the webhook stopped during this deploy; a new deploy follows"

// Environment is the forge environment t deploys to: its environment,
// else its name.
func Environment(t deployer.Target) string {
	if t.Environment != "" {
		return t.Environment
	}
	return t.Name
}

// Clip cuts s to n bytes, marking the cut (a forge's status fields are
// bounded in bytes), at the start of a character: never inside one.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n--
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Short abbreviates a commit SHA.
func Short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// SupersededBy says that a commit which waited deployed as part of the
// branch's newer commit sha.
func SupersededBy(sha string) string {
	return "superseded: deployed with the branch's newer commit " + Short(sha)
}

// Counts says what a deploy did to its objects, in a line.
func Counts(res *deploy.Result) string {
	if res == nil {
		return ""
	}
	c := map[deploy.Action]int{}
	for _, o := range res.Objects {
		c[o.Action]++
	}
	s := fmt.Sprintf("%d created, %d configured, %d unchanged, %d pruned", c[deploy.Created], c[deploy.Configured], c[deploy.Unchanged], c[deploy.Pruned])
	if c[deploy.Kept] > 0 {
		s += fmt.Sprintf(", %d left in the cluster", c[deploy.Kept])
	}
	if c[deploy.Failed]+c[deploy.Skipped] > 0 {
		s += fmt.Sprintf(", %d failed, %d skipped", c[deploy.Failed], c[deploy.Skipped])
	}
	return s
}

// Comment is the deploy comment: one row per target, details per target,
// and how to retry what failed, in at most maxChars characters (the
// forge's MaxCommentChars). Secret values never reach it: only keys.
func Comment(byTarget map[string]deployer.Outcome, maxChars int) string {
	names := make([]string, 0, len(byTarget))
	failed, waiting := 0, 0
	var targets []config.Target
	for n, o := range byTarget {
		names = append(names, n)
		targets = append(targets, o.Target.Target)
		switch {
		case o.Waiting != "":
			waiting++
		case o.Err != nil:
			failed++
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(Marker + "\n")
	fmt.Fprintf(&b, "### kplan deploy: %d of %d targets succeeded", len(names)-failed-waiting, len(names))
	if waiting > 0 {
		fmt.Fprintf(&b, ", %d waiting", waiting)
	}
	b.WriteString("\n\n")
	if order := config.RolloutOrder(targets); len(order) > 1 {
		// The order dependsOn gives, each stage after the one before it
		// succeeded.
		fmt.Fprintf(&b, "Rollout order (dependsOn): %s\n\n", cell(config.DescribeOrder(order)))
	}
	b.WriteString("| Target | Environment | Commit | Result |\n|---|---|---|---|\n")
	for _, n := range names {
		o := byTarget[n]
		res := "✅ " + Counts(o.Result)
		if o.Override != "" {
			res += "<br>⏩ " + cell(o.Override)
		}
		if o.Superseded != "" {
			res = "✅ " + SupersededBy(o.Superseded)
		}
		if o.Waiting != "" {
			res = "⏳ " + cell(Clip(o.Waiting, 600))
		} else if o.Err != nil {
			res = "❌ " + cell(Clip(Public(o.Err.Error()), 300))
			if o.Reason != "" {
				// The kind of failure first, in words; the message says which.
				res = "❌ **" + o.Reason.Describe() + "**: " + cell(Clip(Public(o.Err.Error()), 600))
			}
		}
		if o.Review != nil {
			res += "<br>" + reviewMark(o.Review) + " " + cell(o.Review.Describe())
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", n, Environment(o.Target), Short(o.SHA), res)
	}
	for _, n := range names {
		writeReviewDiff(&b, n, byTarget[n].Review)
		writeSteps(&b, n, byTarget[n].Review)
	}
	for _, n := range names {
		o := byTarget[n]
		if o.Result == nil || len(o.Result.Objects) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n<details><summary>%s: %s</summary>\n\n", n, Counts(o.Result))
		for _, obj := range o.Result.Objects {
			line := fmt.Sprintf("- %s `%s`", obj.Action, strings.ReplaceAll(obj.Key, "|", `\|`))
			if obj.Reason != "" {
				line += " (" + Public(obj.Reason) + ")"
			}
			if obj.Error != "" {
				line += ": " + strings.Join(strings.Fields(Clip(Public(obj.Error), 200)), " ")
			}
			b.WriteString(line + "\n")
		}
		b.WriteString("\n</details>\n")
	}
	if failed > 0 {
		b.WriteString("\n**To retry**: fix the cause (the error above says what failed) and merge again, or wait for the next resync, which retries every failed target at the branch's newest commit.\n")
	}
	out := b.String()
	if utf8.RuneCountInString(out) > maxChars {
		out = forge.CutChars(out, maxChars-100) + "\n\n…(cut to fit the comment size limit)\n"
	}
	return out
}

// cell makes text safe in a Markdown table cell: one line, pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

// writeReviewDiff says, for a merge that differs from what was approved
// or from the plan reviewed, how: the objects the merge applies that the
// approval did not and the reverse, and each changed field (Secret values
// hidden), approved → merged; for a push no one approved, what it
// changed; or why that could not be worked out.
func writeReviewDiff(b *strings.Builder, target string, r *deployer.Review) {
	push := r != nil && r.Verdict == deployer.NotApproved && r.PR == 0
	if r == nil || (r.Verdict != deployer.Differs && r.Verdict != deployer.PlanDiffers && !push) {
		return
	}
	title := fmt.Sprintf("how %s differs from %s", r.Subject(), r.Against())
	added, removed := "not in what was reviewed", "in what was reviewed, not applied"
	if push {
		title = fmt.Sprintf("what %s, which no one approved, changes", r.Subject())
		added, removed = "added by the push", "removed by the push"
	}
	if r.Diff == nil {
		if r.DiffErr != "" {
			fmt.Fprintf(b, "\n%s: %s is not known: %s\n", target, title, Public(r.DiffErr))
		}
		return
	}
	d := r.Diff
	fmt.Fprintf(b, "\n<details open><summary>%s: %s (%d added, %d changed, %d removed)</summary>\n\n",
		target, title, len(d.Added), len(d.Changed), len(d.Pruned))
	for _, k := range d.Added {
		fmt.Fprintf(b, "- \\+ %s: %s\n", cell(inventorydiff.Name(k)), added)
	}
	for _, c := range d.Changed {
		fmt.Fprintf(b, "- ~ %s\n", cell(inventorydiff.Name(c.Key)))
		for _, f := range c.Fields {
			fmt.Fprintf(b, "  - `%s`\n", strings.NewReplacer("`", "'", "\n", " ").Replace(Clip(f.Header(), 200)))
		}
	}
	for _, k := range d.Pruned {
		fmt.Fprintf(b, "- \\- %s: %s\n", cell(inventorydiff.Name(k)), removed)
	}
	b.WriteString("\n</details>\n")
}

// writeSteps lists, when the deploy covers more than one change since
// what the cluster runs (a merge queue, merges during a deploy, a push),
// each change and its verdict, the rule's own words.
func writeSteps(b *strings.Builder, target string, r *deployer.Review) {
	if r == nil || len(r.Steps) < 2 {
		return
	}
	fmt.Fprintf(b, "\n<details><summary>%s: %d changes since what the cluster ran</summary>\n\n", target, len(r.Steps))
	for _, s := range r.Steps {
		mark := "🔒"
		switch s.Verdict {
		case approval.VerdictRefused:
			mark = "⚠️"
		case approval.VerdictUnaffected:
			mark = "·"
		}
		what := "push"
		switch s.Kind {
		case approval.KindPull:
			what = "#" + strconv.Itoa(s.PR)
			if r.Forge == config.GitLab {
				what = "!" + strconv.Itoa(s.PR)
			}
		case approval.KindHistory:
			what = "history"
		}
		fmt.Fprintf(b, "- %s `%s` %s: %s — %s\n", mark, Short(s.Commit), what, s.Verdict, cell(Clip(Public(s.Why), 300)))
	}
	b.WriteString("\n</details>\n")
}

// reviewMark marks a deploy's comparison with the plan reviewed.
func reviewMark(r *deployer.Review) string {
	switch r.Verdict {
	case deployer.AsApproved, deployer.Unaffected, deployer.AsReviewed, deployer.Restored:
		return "🔒"
	case deployer.Differs, deployer.PlanDiffers, deployer.NotApproved, deployer.NotReviewed, deployer.Refused:
		return "⚠️"
	default:
		return "❔"
	}
}
