package test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layers are kplan's packages from the bottom up, in the order the data
// path reads (docs/development.md): snapshot → closure → render →
// inventory → diff → report for a plan, config → deploy → deployer →
// forge reports for a deploy. A package may import only packages of a
// lower layer, so no package imports one above it; a new package is
// given its layer here (the test fails until it is).
var layers = [][]string{
	// Leaves: no kplan package below them.
	{"internal/crash", "internal/batchgc", "internal/batchgc/atstart", "internal/gitcli", "internal/keylock", "internal/netpolicy",
		"internal/version", "internal/kubeversion", "internal/noi18n", "internal/yamldocs", "internal/chartindex", "internal/forge", "internal/inventory",
		"internal/render/hostiletest", "internal/testchart", "internal/testcluster", "internal/browsertest",
		"test/fuzzseed", "test/gittest", "test/githttp", "test/githubapi", "test/gitlabapi"},
	// A repository read: one side of a plan, the mirror a deploy fetches into, remote bases.
	{"internal/snapshot", "internal/gitmirror", "internal/gitbase", "internal/demo", "internal/approval", "internal/charts",
		"internal/testcluster/prebuild", "internal/testhelm"},
	// What an overlay can read.
	{"internal/closure", "internal/testkit", "internal/testhelm/prebuild"},
	// Render.
	{"internal/render", "internal/rendercache"},
	// What a render becomes: releases rendered, inventories, dangers.
	{"internal/helm", "internal/declared", "internal/danger", "internal/resourcegroup"},
	// Targets: Flux's, Argo CD's, the repository's, the webhook's; the diff.
	{"internal/flux", "internal/argocd", "internal/inventorydiff", "internal/repoconfig", "internal/config"},
	// Uses of a diff; the deploy engine; receiving deliveries.
	{"internal/overlap", "internal/markers", "internal/deploy", "internal/ghauth", "internal/webhook"},
	// Reports and the forge; converging targets.
	{"internal/shard", "internal/report", "internal/forge/github", "internal/forge/gitlab",
		"internal/liveplan", "internal/deployer", "internal/leader"},
	// Façades: the plan, the job's verdict on it, a deploy's report.
	{"internal/plan", "internal/gate", "internal/deployreport"},
	// The pull request flow the CI front ends adapt onto.
	{"internal/prflow"},
	// Front ends: the Action, GitLab CI's job, each forge's deploy
	// reports, the webhook's status page.
	{"internal/action", "internal/gitlabci", "internal/forge/github/deploys", "internal/forge/gitlab/deploys", "internal/status"},
	// Mains and the tests of the whole.
	{"cmd/action", "cmd/kplan", "cmd/kplan-gitlab", "cmd/webhook", "bench", "test", "test/deploydemo"},
}

// deployOnly are the packages of the deploy side (the webhook's
// configuration, internal/config, is not: a plan reads which clusters its
// targets deploy to): only the deploy's own
// packages, the mains that deploy (kplan apply, the webhook) and the
// end-to-end tests may import them, so that a plan never links the
// machinery that changes a cluster (TestPlanOnlyBinariesDoNotLinkTheApplier
// checks the binaries; this names the packages).
var deployOnly = []string{
	"internal/resourcegroup", "internal/deploy", "internal/ghauth", "internal/webhook",
	"internal/gitmirror", "internal/liveplan", "internal/deployer", "internal/leader", "internal/deployreport",
	"internal/forge/github/deploys", "internal/forge/gitlab/deploys", "internal/status",
}

// TestNoPackageImportsOneAbove checks every kplan package's imports
// against layers and deployOnly.
func TestNoPackageImportsOneAbove(t *testing.T) {
	const module = "github.com/kplan-dev/kplan/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layer[p] = i
		}
	}
	isDeploy := func(p string) bool { return slices.Contains(deployOnly, p) }
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		p := strings.TrimPrefix(fields[0], module)
		lp, ok := layer[p]
		if !ok {
			t.Errorf("%s has no layer: add it to layers in test/layers_test.go, above every kplan package it imports", p)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			q := strings.TrimPrefix(imp, module)
			lq, ok := layer[q]
			if ok && lq >= lp {
				t.Errorf("%s (layer %d) imports %s (layer %d), a package at or above its own", p, lp, q, lq)
			}
			if isDeploy(q) && !isDeploy(p) && lp < len(layers)-1 {
				t.Errorf("%s imports %s, a package of the deploy side", p, q)
			}
		}
	}
}
