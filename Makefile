# The README's two commands: `make demo` and `make test`.
GO ?= go
# The binaries the Dockerfile builds; CI builds the same ones.
BINARIES := ./cmd/action ./cmd/kplan ./cmd/webhook ./cmd/kplan-gitlab

.PHONY: demo demo-deploy test vet unit tests race race-all lint build bench flate cluster cluster-apiserver cluster-helm browser screenshots fuzz conformance-flux

# timed runs a step saying what it does first and how long it took after:
# on a fresh machine a step compiles for minutes, and silence reads as a
# hang. $(1) says what (no commas), $(2) is the command.
define timed
	@echo "make $@: $(1)"; t0=$$(date +%s); $(2); rc=$$?; echo "make $@: $(1): $$(( $$(date +%s) - t0 ))s"; exit $$rc
endef

# kplan is built once into ./kplan (git ignores it) and run: the first
# build compiles kustomize and client-go (minutes on 2 cores); Go's build
# cache keeps them, so the next `make demo` links in seconds.
demo:
	$(call timed,building ./kplan from cmd/kplan (the first time takes minutes; Go caches it),$(GO) build -o kplan ./cmd/kplan)
	./kplan demo

# A merge deploying to a local kube-apiserver through kplan-webhook.
demo-deploy: cluster
	$(GO) run ./test/deploydemo

# The compile-only steps run one after the other: run side by side they
# compiled the same Kubernetes packages twice (the helm build reuses what
# the cluster build compiled, and vet shares them too), and a fresh
# machine took longer. Then lint, then the tests (unit runs the
# race-detector tests beside the others). `make build` is not among them:
# vet type-checks every package and the tests link each main package
# (lint links kplan-gitlab, which has no test of its own), so it only took
# 15 s more.
test:
	@$(MAKE) --no-print-directory vet cluster-apiserver cluster-helm browser lint unit
	@echo "make test: passed"

vet:
	$(GO) mod tidy -diff
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo 'gofmt: files above need formatting'; exit 1; }
	$(call timed,go vet ./... (compiles every package the first time),$(GO) vet ./...)

# The binaries compile, in one go build, with the flags the tests build
# them with: their packages are compiled once, for this and for the tests
# (-trimpath, which the release adds, made a second copy of everything).
build:
	$(call timed,compiling $(BINARIES),$(GO) build -o /dev/null $(BINARIES))

# actionlint checks .github/workflows; action.yml is checked by a Go test.
# gocyclo keeps every function at cyclomatic complexity 30 or less: a
# longer one becomes named phases.
lint:
	$(GO) build -o /dev/null ./cmd/kplan-gitlab
	$(GO) tool -modfile=tools/go.mod actionlint
	$(GO) tool -modfile=tools/go.mod gocyclo -over 30 internal cmd

# etcd and kube-apiserver for the tests that need a real cluster, built
# from tools/cluster (about 4 minutes the first time, then cached), and
# helm and kustomize for the Helm tests, from tools/helm (as long again).
cluster: cluster-apiserver cluster-helm

cluster-apiserver:
	$(call timed,etcd and kube-apiserver for the tests (first time: about 4 minutes; then cached in ~/.cache/kplan),$(GO) run ./internal/testcluster/prebuild)

cluster-helm:
	$(call timed,helm and kustomize for the Helm tests (first time: about 4 minutes; then cached),$(GO) run ./internal/testhelm/prebuild)

# Debian's chromium for the browser tests (internal/browsertest: the
# webhook's status page is tested in it), installed when no Chromium is
# on PATH (about 30 s, once); quiet unless it fails.
browser:
	@sh scripts/install-chromium.sh

# Benchmarks print ratios against a peer measured in the same run (the
# kubeflow plans against the kustomize CLI, the Flux cases against flate,
# the one-Application Argo CD change against the full plan of 500
# Applications, the webhook's 200-target fleet under each
# --max-parallel-deploys: docs/performance.md). The plan bench compares each case
# with the figures recorded in bench/baseline.json and prints a block of
# "SLOWER THAN BASELINE" lines when one is more than 20% slower (by its
# CPU, and by its CPU over its peer's too where it has one) or larger;
# BENCHFLAGS=-strict makes that an exit status, BENCHFLAGS=-record
# writes this run's figures there.
# flate is built first (make flate); when it cannot be, the Flux cases run
# without its columns and say how to install it.
# The fleet takes 11 to 17 minutes on a shared 2-core machine.
BENCHFLAGS ?=
bench: cluster
	$(GO) test -run '^$$' -bench ApplyPrune -benchtime 1x -timeout 30m ./internal/deploy
	$(GO) test -run '^$$' -bench Fleet -benchtime 1x -timeout 90m ./internal/deployer
	$(GO) test -run '^$$' -bench Deliveries ./internal/webhook
	@flate=$$($(GO) run ./bench -install-flate) || { echo "make bench: flate could not be built (above): the Flux cases run without it"; flate=; }; \
	echo "$(GO) run ./bench -corpus ../shared/corpus/kubeflow-manifests.tar.gz -runs 3 -flate '$$flate' $(BENCHFLAGS)"; \
	$(GO) run ./bench -corpus ../shared/corpus/kubeflow-manifests.tar.gz -runs 3 -flate "$$flate" $(BENCHFLAGS)

# flate (github.com/home-operations/flate, AGPL-3.0), the Flux cases'
# peer: the version bench/flate.go pins, the newest the Go module proxy
# serves, built with the one newer Go it needs (GOTOOLCHAIN=go1.27.3,
# which the go command fetches from the proxy) into ~/.cache/kplan, once
# (about 5 minutes on 2 cores). It runs as a program of its own; kplan
# never imports or links it.
flate:
	$(call timed,flate for the bench's Flux cases (first time: about 5 minutes; then cached),$(GO) run ./bench -install-flate)

# The tests, two runs side by side. The packages where kplan's own
# goroutines share state across requests (RACE_PKGS: the deploy through
# cli-utils, the deployer's workers, the live plan, the webhook's
# deliveries, leader election, the key locks; not cmd/webhook, the glue,
# whose forge clients alone took a minute to compile again) run with the
# race detector;
# every other package runs without it (-vet=off: make vet ran every check
# go test would repeat per package), reusing the packages vet and build
# compiled, and with them the corpus checks (closure soundness,
# changed-only equals full on kubeflow/manifests; they skip under the race
# detector). Compiling every package a second time for the race detector
# took a fresh 2-core machine 9 more CPU-minutes; `make race-all` still
# runs everything with it. The corpus is KPLAN_CORPUS, default
# ../shared/corpus/kubeflow-manifests.tar.gz.
# The packages whose tests take longest go first: go test starts packages
# in the order given, and the end-to-end package (5 minutes, mostly
# waiting on the processes it starts) last left one core idle.
SLOW_PKGS := ./test ./internal/plan
RACE_PKGS := ./internal/deploy ./internal/deployer ./internal/liveplan ./internal/webhook ./internal/leader ./internal/keylock ./internal/status

unit:
	@$(MAKE) --no-print-directory -j2 tests race

tests:
	@corpus=$${KPLAN_CORPUS:-../shared/corpus/kubeflow-manifests.tar.gz}; test -f "$$corpus" || echo "make tests: no corpus at $$corpus (KPLAN_CORPUS): the corpus checks skip"
	$(call timed,the tests of every package but RACE_PKGS (with the corpus checks),$(GO) test -vet=off -count=1 -timeout 20m $(SLOW_PKGS) $$($(GO) list ./... | grep -vxF "$$($(GO) list $(RACE_PKGS) $(SLOW_PKGS))"))

race:
	$(call timed,the tests of RACE_PKGS with the race detector (compiles them and what they import again),$(GO) test -race -vet=off -count=1 -timeout 20m $(RACE_PKGS))

race-all:
	$(GO) test -race -vet=off -count=1 -timeout 30m ./...

# The PR comment as GitHub shows it, the HTML report (-o html) and the
# webhook's status page, in
# docs/ (needs Debian's chromium and cmark-gfm, and npm; documentation
# only, not part of make test). The status page is the one its browser
# test checks, after a deploy, a failed apply and a refusal.
screenshots: browser cluster-apiserver
	KPLAN_STATUS_SCREENSHOT=$(CURDIR)/docs/status-page.png $(GO) test -count=1 -run '^TestWebhookStatusPageInBrowser$$' ./test
	KPLAN_REPORT_SCREENSHOT=$(CURDIR)/docs/html-report.png $(GO) test -count=1 -run '^TestHTMLReportInBrowser$$' ./test
	sh tools/screenshots/screenshots.sh

# The real Flux controllers (source-, kustomize- and helm-controller, built
# from their Go modules) as the oracle of kplan's Flux plans: replays the
# repositories of tools/fluxconformance/cases.txt through them on the test
# apiserver and compares what they apply with kplan's plan, target by
# target (docs/flux.md). Not part of make test: the first build of the
# controllers takes tens of minutes, each commit a minute or more.
# CONFORMANCE_FLAGS=-only=fkhe runs the cases whose name has "fkhe".
CORPUS ?= $(abspath ../shared/corpus)
MIRROR ?= /work/.mirror
CONFORMANCE_FLAGS ?=
conformance-flux: cluster-apiserver
	cd tools/fluxconformance && CORPUS=$(CORPUS) MIRROR=$(MIRROR) $(GO) run . $(CONFORMANCE_FLAGS)

# Each fuzz target for FUZZTIME (go test -fuzz runs one target at a time);
# `make test` runs their seeds. A crasher is written under the package's
# testdata/fuzz/<target>/: commit it with the fix, it is a regression
# test from then on (docs/fuzzing.md).
FUZZTIME ?= 30s
# go minimizes each input that finds new coverage for up to a minute,
# during which the target is not fuzzed: a 30 s run would do little else.
FUZZMINIMIZETIME ?= 5s
FUZZFLAGS ?=
FUZZ_TARGETS := \
	./internal/flux:FuzzDiscover \
	./internal/flux:FuzzResourceSets \
	./internal/yamldocs:FuzzMappings \
	./internal/yamldocs:FuzzObjects \
	./internal/yamldocs:FuzzOne \
	./internal/helm:FuzzChartManifest \
	./internal/resourcegroup:FuzzKptfileInventory \
	./internal/render:FuzzScrubberCollect \
	./internal/argocd:FuzzParseFile \
	./internal/argocd:FuzzObjectOf \
	./internal/argocd:FuzzIgnoreRules \
	./internal/argocd:FuzzGitFile \
	./internal/argocd:FuzzDirectoryManifests \
	./internal/closure:FuzzClosure \
	./internal/closure:FuzzJSON \
	./internal/rendercache:FuzzDecodeScans \
	./internal/rendercache:FuzzDecodeParses \
	./internal/repoconfig:FuzzParse \
	./internal/config:FuzzParse \
	./internal/webhook:FuzzDelivery \
	./internal/forge/gitlab:FuzzDecode \
	./internal/forge/gitlab:FuzzFromCI \
	./internal/markers:FuzzParseReviewed \
	./internal/flux:FuzzSecretMasking \
	./internal/chartindex:FuzzParseIndex \
	./internal/flux:FuzzSubstituteKnown \
	./internal/helm:FuzzParseRelease \
	./internal/helm:FuzzValuesFrom \
	./internal/helm:FuzzLoadChart \
	./internal/helm:FuzzBuildDependencies \
	./internal/charts:FuzzNewestTag \
	./internal/charts:FuzzFiles \
	./internal/charts:FuzzRepositories \
	./internal/declared:FuzzRGFile \
	./internal/approval:FuzzParseRecord \
	./internal/approval:FuzzApprovalHistories \
	./internal/status:FuzzRequest

fuzz:
	@failed=; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $(FUZZFLAGS) $$pkg || failed="$$failed $$t"; \
	done; test -z "$$failed" || { echo "fuzzing failed:$$failed"; exit 1; }
