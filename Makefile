# The README's two commands: `make demo` and `make test`.
GO ?= go
# The binaries the Dockerfile builds; CI builds the same ones.
BINARIES := ./cmd/action ./cmd/kplan ./cmd/webhook

.PHONY: demo demo-deploy test vet unit lint build bench cluster screenshots fuzz

demo:
	$(GO) run ./cmd/kplan demo

# A merge deploying to a local kube-apiserver through kplan-webhook.
demo-deploy: cluster
	$(GO) run ./test/deploydemo

test: vet build lint cluster unit

vet:
	$(GO) mod tidy -diff
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo 'gofmt: files above need formatting'; exit 1; }
	$(GO) vet ./...

build:
	@for b in $(BINARIES); do CGO_ENABLED=0 $(GO) build -trimpath -o /dev/null $$b || exit 1; done

# actionlint checks .github/workflows; action.yml is checked by a Go test.
lint:
	$(GO) tool -modfile=tools/go.mod actionlint

# etcd and kube-apiserver for the tests that need a real cluster, built
# from tools/cluster (about 4 minutes the first time, then cached), and
# helm and kustomize for the Helm tests, from tools/helm (as long again).
cluster:
	$(GO) run ./internal/testcluster/prebuild
	$(GO) run ./internal/testhelm/prebuild

# Benchmarks print ratios against a peer measured in the same run.
bench: cluster
	$(GO) test -run '^$$' -bench ApplyPrune -benchtime 1x -timeout 30m ./internal/deploy
	$(GO) test -run '^$$' -bench Deliveries ./internal/webhook
	$(GO) run ./bench -corpus ../shared/corpus/kubeflow-manifests.tar.gz -runs 3

# Every test with the race detector, then the corpus checks (closure
# soundness, changed-only equals full on kubeflow/manifests) without it,
# which would make their hundreds of renders take many minutes. The corpus
# is KPLAN_CORPUS, default ../shared/corpus/kubeflow-manifests.tar.gz.
unit:
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run Corpus -timeout 20m ./internal/closure ./internal/plan

# The PR comment as GitHub shows it, in docs/ (needs Debian's chromium and
# cmark-gfm, and npm; documentation only, not part of make test).
screenshots:
	sh tools/screenshots/screenshots.sh

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
	./internal/argocd:FuzzParseFile \
	./internal/closure:FuzzClosure \
	./internal/closure:FuzzJSON \
	./internal/repoconfig:FuzzParse \
	./internal/config:FuzzParse \
	./internal/webhook:FuzzDelivery \
	./internal/prcomment:FuzzParseReviewed \
	./internal/flux:FuzzSecretMasking \
	./internal/chartindex:FuzzParseIndex \
	./internal/helmrelease:FuzzParseRelease \
	./internal/helmrelease:FuzzValuesFrom \
	./internal/helmrelease:FuzzLoadChart \
	./internal/helmrelease:FuzzChallenge \
	./internal/declared:FuzzRGFile

fuzz:
	@failed=; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $(FUZZFLAGS) $$pkg || failed="$$failed $$t"; \
	done; test -z "$$failed" || { echo "fuzzing failed:$$failed"; exit 1; }
