# kplan's image, built from source: the kplan CLI (the entry point, as in
# the released image, Dockerfile.release), the GitHub Action's kplan-action
# and the webhook (deploy/ and the chart run /usr/local/bin/kplan-webhook).

# Base images are pinned by digest (multi-arch index digests, as
# `docker buildx imagetools inspect` prints them); Dependabot's docker
# ecosystem proposes new digests weekly. The tag stays for readers.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
# Modules first, so a source-only change reuses the download layer.
COPY go.mod go.sum ./
# The modules go.mod replaces with patched copies (third_party/README.md).
COPY third_party/ third_party/
RUN go mod download
COPY . .
# Static binaries: the final image has no Go toolchain and needs no libc match.
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags='-s -w' -o /out/kplan-action ./cmd/action \
 && go build -trimpath -ldflags='-s -w' -o /out/kplan ./cmd/kplan \
 && go build -trimpath -ldflags='-s -w' -o /out/kplan-webhook ./cmd/webhook \
 && go build -trimpath -ldflags='-s -w' -o /out/kplan-gitlab ./cmd/kplan-gitlab
# helm, for webhook targets with enableHelm: the version tools/helm/go.mod
# pins, the one the tests render charts with (checked against go.sum).
RUN cd tools/helm && go build -trimpath -ldflags='-s -w' -o /out/helm helm.sh/helm/v3/cmd/helm

FROM debian:bookworm-slim@sha256:d5d3f9c23164ea16f31852f95bd5959aad1c5e854332fe00f7b3a20fcc9f635c
# kplan shells out to git to read the base and head commits. The mounted
# workspace belongs to the runner's uid, and git refuses such repositories
# unless they are marked safe. helm (about 50 MB) inflates helmCharts for
# webhook targets with enableHelm; the Action runs kplan on the runner,
# which has its own helm (README: Helm charts).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && git config --system --add safe.directory '*'
COPY --from=build /out/kplan-action /out/kplan /out/kplan-webhook /out/kplan-gitlab /out/helm /usr/local/bin/
# GitHub-hosted runners run as uid 1001 and own the workspace and the
# GITHUB_OUTPUT file with it, so the action can run without root.
USER 1001
ENTRYPOINT ["/usr/local/bin/kplan"]
