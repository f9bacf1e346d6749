package main

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagsDocumented checks docs/cli.md against the command tree both
// ways: every flag of every command (hidden ones aside) is named there as
// --flag, and every --flag it names is a flag of some command, so that a
// flag renamed or removed leaves no stale line behind.
func TestFlagsDocumented(t *testing.T) {
	page, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	// From the commands on: the install section names cosign's flags.
	_, doc, _ := strings.Cut(string(page), "## Commands")
	flags := map[string][]string{} // flag name → the commands that have it
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				flags[f.Name] = append(flags[f.Name], c.CommandPath())
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd(slog.New(slog.NewTextHandler(io.Discard, nil)), nil))
	for name, cmds := range flags {
		if !regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b`).MatchString(doc) {
			t.Errorf("docs/cli.md: --%s (%s) is not documented", name, strings.Join(cmds, ", "))
		}
	}
	// --format is -o's alias (outputFlag); --help every command's.
	known := func(name string) bool { _, ok := flags[name]; return ok || name == "format" || name == "help" }
	var stale []string
	for _, m := range regexp.MustCompile(`(?:^|[\s(\x60'"/])--([a-z][a-z0-9-]*[a-z0-9])`).FindAllStringSubmatch(doc, -1) {
		if !known(m[1]) && !slices.Contains(stale, m[1]) {
			stale = append(stale, m[1])
		}
	}
	for _, name := range stale {
		t.Errorf("docs/cli.md names --%s, which no kplan command has", name)
	}
}
