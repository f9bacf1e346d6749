// Command kplan-gitlab is kplan's GitLab CI entry point: run in a merge
// request pipeline (templates/kplan-plan.yml), it plans what merging the
// merge request will do and keeps one note on it (internal/gitlabci).
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/kplan-dev/kplan/internal/batchgc/atstart" // the collector off while packages initialize
	"github.com/kplan-dev/kplan/internal/crash"
	"github.com/kplan-dev/kplan/internal/gitlabci"
	"github.com/kplan-dev/kplan/internal/plan"
)

func main() {
	// krusty writes its deprecation warnings to os.Stderr itself, naming
	// no file; the plan reports them on each overlay, naming the file.
	stderr, closeStderr := plan.QuietKustomize()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout, stderr)
	stop()
	closeStderr()
	os.Exit(code)
}

// runMain runs the job and returns its exit status, having said why: 1
// for any error, a crash included (with its stack and a request for a
// report).
func runMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return crash.Exit(stderr, "kplan-gitlab", func() error { return run(ctx, args, getenv, stdout, stderr) })
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return gitlabci.Run(ctx, args, getenv, stdout, stderr)
}
