package test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/test/githubapi"
)

// TestActionOverlaysInputMatchingNothingFails pins "no silent green" in
// the Action: an overlays input with a typo ('ovv/*') fails the step
// naming the input, where a pull request breaking two overlays passed
// with an empty plan; the runner's error annotation carries the message
// (cmd/action's runMain, TestCrashExitsOne).
func TestActionOverlaysInputMatchingNothingFails(t *testing.T) {
	up, baseSHA, headSHA := prRepo(t,
		map[string]string{"ov/a/kustomization.yaml": "resources: [cm.yaml]\n", "ov/a/cm.yaml": configMap("a")},
		map[string]string{"ov/a/kustomization.yaml": "resources: [cm.yaml, missing.yaml]\n"})
	gh := githubapi.New()
	defer gh.Close()
	gh.AddToken("ghs_test", githubapi.Identity{Login: "github-actions[bot]"})
	ws := checkout(t, up, "feature")
	r := newRunner(t, ws, pullRequestEvent(t, "opened.payload.json", baseSHA, headSHA), gh.URL(), "ghs_test")
	r.env["INPUT_OVERLAYS"] = "ovv/*"
	err := r.run(t)
	if !errors.Is(err, plan.ErrNoMatch) || !strings.Contains(err.Error(), `input overlays "ovv/*" matches no overlay of base or head (there are ov/a)`) {
		t.Fatalf("overlays: 'ovv/*': %v; want the step to fail naming the input", err)
	}
	r.env["INPUT_OVERLAYS"], r.env["INPUT_EXCLUDE"] = "ov/*", "ov/b"
	if err := r.run(t); !errors.Is(err, plan.ErrNoMatch) || !strings.Contains(err.Error(), `input exclude "ov/b"`) {
		t.Fatalf("exclude: 'ov/b': %v; want the step to fail naming the input", err)
	}
}
