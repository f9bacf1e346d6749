// Command kplan-action is the entrypoint of the kplan GitHub Action.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sethvargo/go-githubactions"

	"github.com/kplan-dev/kplan/internal/action"
	_ "github.com/kplan-dev/kplan/internal/batchgc/atstart" // the collector off while packages initialize
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/plan"
)

func main() {
	// krusty writes its deprecation warnings to os.Stderr itself, naming
	// no file; the plan reports them as notes on each overlay, naming the
	// file, so the raw lines are left out of the log.
	stderr, closeStderr := plan.QuietKustomize()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout, stderr, githubactions.New())
	stop()
	closeStderr()
	os.Exit(code)
}

// runMain runs the Action and returns the status the step ends with,
// having reported why through a: 1 for any error, a crash (a panic in
// run, recovered) included, which is also written to stderr with its
// stack and a request for a report.
func runMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, a *githubactions.Action) int {
	err := crash.Catch(func() error { return run(ctx, args, getenv, stdout, stderr) })
	if err == nil {
		return 0
	}
	crash.Report(stderr, "kplan", err)
	// An error command makes the failure an annotation on the run.
	a.Errorf("kplan: %v", err)
	return 1
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return action.Run(ctx, args, getenv, stdout, stderr)
}
