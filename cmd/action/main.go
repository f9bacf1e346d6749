// Command kplan-action is the entrypoint of the kplan GitHub Action.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sethvargo/go-githubactions"

	"github.com/kplan-dev/kplan/internal/action"
	_ "github.com/kplan-dev/kplan/internal/noi18n" // before kubectl's packages start
	"github.com/kplan-dev/kplan/internal/plan"
)

func main() {
	// krusty writes its deprecation warnings to os.Stderr itself, naming
	// no file; the plan reports them as notes on each overlay, naming the
	// file, so the raw lines are left out of the log.
	filter, stderr, err := plan.FilterStderr()
	if err != nil {
		fmt.Fprintln(stderr, "kplan: kustomize's warnings will show raw:", err)
	} else {
		filter.Drop.Store(true)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, os.Args[1:], os.Getenv, os.Stdout, stderr)
	stop()
	filter.Close()
	if err != nil {
		// An error command makes the failure an annotation on the run.
		githubactions.New().Errorf("kplan: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return action.Run(ctx, args, getenv, stdout, stderr)
}
