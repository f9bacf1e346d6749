package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kplan-dev/kplan/internal/gitcli"
	"github.com/kplan-dev/kplan/internal/render"
	"github.com/kplan-dev/kplan/internal/report"
)

// Shell completion of flag values: what a flag takes, from the owner of
// its values (report.Formats, the diff styles, the repository's refs),
// so a new format or style completes without a change here.

// fixedValues completes a flag from a list.
func fixedValues(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// formatValues are the -o values: every format's name and aliases.
func formatValues() []string {
	var out []string
	for _, f := range report.Formats {
		out = append(out, f.Name)
		out = append(out, f.Aliases...)
	}
	return out
}

// completeOutput completes -o/--output and --diff-style where cmd has them.
func completeOutput(cmd *cobra.Command) {
	if cmd.Flags().Lookup("output") != nil {
		_ = cmd.RegisterFlagCompletionFunc("output", fixedValues(formatValues()...))
	}
	if cmd.Flags().Lookup("diff-style") != nil {
		_ = cmd.RegisterFlagCompletionFunc("diff-style", fixedValues(report.DiffFields, report.DiffUnified))
	}
	if cmd.Flags().Lookup("load-restrictor") != nil {
		_ = cmd.RegisterFlagCompletionFunc("load-restrictor", fixedValues(render.LoadRestrictionsRootOnly, render.LoadRestrictionsNone))
	}
}

// completeRefs completes flags naming revisions with the branches and
// tags of the repository -C/--dir names (the current directory's by
// default); outside a repository, nothing.
func completeRefs(cmd *cobra.Command, flags ...string) {
	refs := func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		dir, _ := cmd.Flags().GetString("dir")
		out, err := gitcli.Repo{Dir: dir}.Run(cmd.Context(), "for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags", "refs/remotes")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, n := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if n != "" && strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
		if strings.HasPrefix("HEAD", prefix) {
			names = append(names, "HEAD")
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	for _, f := range flags {
		_ = cmd.RegisterFlagCompletionFunc(f, refs)
	}
}
