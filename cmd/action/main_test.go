package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"

	"github.com/kplan-dev/kplan/internal/crash"
)

// A panic in the Action's run fails the step with 1 and an error
// annotation, and writes the panic's stack and where to report it:
// never 2, Go's status for a panic nobody recovers.
func TestCrashExitsOne(t *testing.T) {
	var stdout, stderr, commands bytes.Buffer
	getenv := func(k string) string { panic("injected: getenv " + k) }
	code := runMain(context.Background(), nil, getenv, &stdout, &stderr, githubactions.New(githubactions.WithWriter(&commands)))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"kplan crashed (a bug): " + crash.Marker + "injected: getenv", "\npanic(", "please report it, with the lines above, at " + crash.ReportURL} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.HasPrefix(commands.String(), "::error::kplan: "+crash.Marker+"injected: getenv") {
		t.Errorf("workflow commands %q, want an error annotation with the panic", commands.String())
	}
}
