package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kplan-dev/kplan/internal/report"
	"github.com/kplan-dev/kplan/internal/shard"
)

// writePart prints one shard's plan for kplan merge.
func writePart(w io.Writer, part shard.Part) error {
	data, err := json.Marshal(part)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

func mergeCmd() *cobra.Command {
	var (
		failOnError, exitCode bool
		diffStyle             string
	)
	cmd := &cobra.Command{
		Use:   "merge PART.json...",
		Short: "Join the parts kplan diff --shard wrote into the one plan",
		Long: "Join the parts kplan diff --shard I/N -o json wrote, one per shard, into the plan\n" +
			"kplan diff prints unsharded. Parts of different commits, kplan versions or shard\n" +
			"counts are refused, and so is a set with a shard missing.",
		Example: "  kplan merge part-*.json\n  kplan merge part-*.json -o markdown --exit-code",
		Args:    cobra.MinimumNArgs(1),
	}
	f := cmd.Flags()
	format := outputFlag(cmd, report.Formats[0].Name, report.FormatNames())
	f.BoolVar(&failOnError, "fail-on-error", true, "exit 1 when the change breaks an overlay, as kplan diff")
	f.BoolVar(&exitCode, "exit-code", false, "exit 2 when the plan has changes")
	f.StringVar(&diffStyle, "diff-style", report.DiffFields, "fields or unified, as kplan diff")
	maxBytes := maxBytesFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, files []string) error {
		if _, err := report.LookupFormat(*format); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		if err := report.CheckDiffStyle(diffStyle); err != nil {
			return fmt.Errorf("--diff-style: %w", err)
		}
		if err := checkMaxBytes(cmd, *format, *maxBytes); err != nil {
			return err
		}
		parts, err := readParts(files)
		if err != nil {
			return err
		}
		p, err := shard.Merge(parts)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if err := report.Write(cmd.OutOrStdout(), p, *format, report.Options{DiffStyle: diffStyle, MaxBytes: *maxBytes}); err != nil {
			return err
		}
		return planExit(p, failOnError, exitCode)
	}
	return cmd
}

// readParts reads part files, each named for messages.
func readParts(files []string) ([]shard.Named, error) {
	var parts []shard.Named
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		part, err := shard.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("merge: %s: %w", name, err)
		}
		parts = append(parts, shard.Named{Name: name, Part: part})
	}
	return parts, nil
}
