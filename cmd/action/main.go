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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		// An error command makes the failure an annotation on the run.
		githubactions.New().Errorf("kplan: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return action.Run(ctx, args, getenv, stdout, stderr)
}
