package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kplan-dev/kplan/internal/approval"
	"github.com/kplan-dev/kplan/internal/gitcli"
)

// refusedExit is kplan approval's status when the tip may not be
// applied.
const refusedExit = 3

func approvalCmd() *cobra.Command {
	var dir, deployed, tip, reviews, target string
	cmd := &cobra.Command{
		Use:   "approval --deployed SHA --tip SHA --reviews FILE",
		Short: "Say whether the tip may be applied: every change since what runs was approved as a diff",
		Long: "Walk the branch's first-parent history from the commit a target runs (--deployed) to\n" +
			"--tip and judge each step against the review record (--reviews: the pull requests,\n" +
			"their reviews and the reviewers' permissions, in the shapes of GitHub's API): a step\n" +
			"that changes what the target reads must be its pull request's approved diff applied\n" +
			"to the step's parent (docs/security.md, \"The rule (kplan approval)\").\n" +
			"--target OVERLAY restricts the target to the files under that directory; the webhook\n" +
			"will use the overlay's full closure (its bases and every file its build reads).\n" +
			"Run in a checkout that holds the commits, the approved heads included.",
		Example: "  kplan approval --deployed 1a2b3c4 --tip origin/main --reviews reviews.json\n" +
			"  kplan approval --deployed $DEPLOYED --tip HEAD --reviews reviews.json --target overlays/prod -o json",
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVarP(&dir, "dir", "C", ".", "the repository's directory")
	f.StringVar(&deployed, "deployed", "", "the commit the target runs (its inventory's kplan.dev/deployed-sha)")
	f.StringVar(&tip, "tip", "", "the commit to apply")
	f.StringVar(&reviews, "reviews", "", "the review record, a JSON file (docs/cli.md)")
	f.StringVar(&target, "target", "", "an overlay's directory: only changes under it need approval (default: the whole tree)")
	format := outputFlag(cmd, "text", "text or json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format, "text", "json"); err != nil {
			return err
		}
		for name, v := range map[string]string{"--deployed": deployed, "--tip": tip, "--reviews": reviews} {
			if v == "" {
				return fmt.Errorf("%s is required", name)
			}
		}
		data, err := os.ReadFile(reviews)
		if err != nil {
			return fmt.Errorf("--reviews: %w", err)
		}
		rec, err := approval.Parse(data)
		if err != nil {
			return fmt.Errorf("--reviews %s: %w", reviews, err)
		}
		ctx := cmd.Context()
		repo := gitcli.Repo{Dir: dir}
		in := approval.Input{Record: rec}
		if in.Deployed, err = repo.ResolveCommit(ctx, deployed); err != nil {
			return fmt.Errorf("--deployed: %w", err)
		}
		if in.Tip, err = repo.ResolveCommit(ctx, tip); err != nil {
			return fmt.Errorf("--tip: %w", err)
		}
		if target != "" {
			t := path.Clean(strings.Trim(target, "/"))
			if t == ".." || strings.HasPrefix(t, "../") {
				return fmt.Errorf("--target %s: want a directory inside the repository", target)
			}
			in.Scope = approval.Dir(t)
		}
		res, err := approval.Check(ctx, approval.CLI{Repo: repo}, in)
		if err != nil {
			return err
		}
		if *format == "json" {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			err = enc.Encode(res)
		} else {
			err = writeApproval(cmd.OutOrStdout(), res)
		}
		if err != nil {
			return err
		}
		if !res.Ok() {
			return exitError(refusedExit)
		}
		return nil
	}
	return cmd
}

// writeApproval prints the verdict as text: one line per step, then the
// tip's verdict.
func writeApproval(w io.Writer, r *approval.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s → %s (%s)\n", short(r.Deployed), short(r.Tip), r.Scope)
	for _, s := range r.Steps {
		what := "push"
		switch s.Kind {
		case approval.KindPull:
			what = fmt.Sprintf("#%d", s.PR)
			if len(s.Commits) > 1 {
				what += fmt.Sprintf(" (%d commits)", len(s.Commits))
			}
		case approval.KindHistory:
			what = "history"
		}
		fmt.Fprintf(&b, "  %s  %-14s %-10s %s\n", short(s.Commit), what, s.Verdict, s.Why)
		if s.Fix != "" {
			fmt.Fprintf(&b, "  %7s  %-14s %-10s to apply it: %s\n", "", "", "", s.Fix)
		}
	}
	if len(r.Unreadable) > 0 {
		fmt.Fprintf(&b, "not counted: the permission of @%s could not be read (counted as not a writer)\n", strings.Join(r.Unreadable, ", @"))
	}
	fmt.Fprintf(&b, "%s: %s\n", r.Verdict, r.Why)
	_, err := io.WriteString(w, b.String())
	return err
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
