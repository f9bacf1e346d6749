#!/bin/sh
# Renders kplan's PR comment as GitHub shows it and screenshots it:
# cmark-gfm (GitHub's Markdown, with its extensions) inside GitHub's
# Markdown stylesheet, in headless Chromium. Writes docs/comment-small.png
# (the built-in demo), docs/comment-kubeflow.png (a change to a base
# most kubeflow overlays read) and docs/comment-kubeflow-istio.png (the
# Istio patch bump of kubeflow/manifests' history, commit d04e9b4, from
# KPLAN_CORPUS_HISTORY, default ../shared/corpus/kubeflow-manifests-100.bundle;
# skipped, saying so, without it), and that bump's HTML report (-o html)
# as docs/html-report-kubeflow-istio.png. `make screenshots` also writes
# docs/html-report.png from TestHTMLReportInBrowser.
#
# Needs: Debian's chromium and cmark-gfm (apt-get install chromium
# cmark-gfm), Node.js with npm, git, Go. Documentation only: make test
# does not run it.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=${KPLAN_CORPUS:-$root/../shared/corpus/kubeflow-manifests.tar.gz}
history=${KPLAN_CORPUS_HISTORY:-$root/../shared/corpus/kubeflow-manifests-100.bundle}
for tool in chromium cmark-gfm npm git go; do
	command -v "$tool" >/dev/null || { echo "screenshots: $tool is missing (apt-get install chromium cmark-gfm nodejs npm)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$root/tools/screenshots
(cd "$work" && npm init -y >/dev/null && npm install --silent github-markdown-css@5 playwright-core@1 >/dev/null)
cp "$work/node_modules/github-markdown-css/github-markdown-light.css" "$work/"
cp "$here/shoot.mjs" "$work/"
go build -o "$work/kplan" "$root/cmd/kplan"

# shot MARKDOWN PNG [MAX_HEIGHT]
shot() {
	cmark-gfm --unsafe -e table -e strikethrough -e autolink -e tagfilter "$1" > "$work/body.html"
	awk -v body="$work/body.html" '/<!-- BODY -->/ { while ((getline line < body) > 0) print line; next } { print }' \
		"$here/page.html" > "$work/page.html"
	(cd "$work" && node shoot.mjs "$work/page.html" "$2" "${3:-}")
	echo "screenshots: wrote $2"
}

# A small PR: the built-in demo.
"$work/kplan" demo -o markdown > "$work/small.md" 2>/dev/null
shot "$work/small.md" "$root/docs/comment-small.png"

# A large PR on kubeflow/manifests: a release bump, v1.10.0 → v1.10.1 and
# v0.19.0 → v0.19.1 in every image the manifests pin to them.
mkdir "$work/kf"
tar -xzf "$corpus" -C "$work/kf" --strip-components=1
cd "$work/kf"
git init -q -b main && git add -A && git -c user.name=kplan -c user.email=kplan@example.invalid commit -qm base
base=$(git rev-parse HEAD)
grep -rl --include=kustomization.yaml -e 'newTag: v1.10.0$' -e 'newTag: v0.19.0$' . |
	xargs sed -i -e 's/newTag: v1.10.0$/newTag: v1.10.1/' -e 's/newTag: v0.19.0$/newTag: v0.19.1/'
git -c user.name=kplan -c user.email=kplan@example.invalid commit -qam "release v1.10.1"
"$work/kplan" diff --base "$base" --head HEAD --format markdown > "$work/kubeflow.md" 2>/dev/null || true
cd "$root"
shot "$work/kubeflow.md" "$root/docs/comment-kubeflow.png" 2400

# The Istio patch bump (1.28.0/1.29.0 -> 1.29.1), as kubeflow/manifests
# merged it: its parent against it.
if [ -f "$history" ]; then
	git clone -q "$history" "$work/kf-history"
	(cd "$work/kf-history" && "$work/kplan" diff --base d04e9b4~1 --head d04e9b4 --format markdown > "$work/istio.md" 2>/dev/null) || true
	shot "$work/istio.md" "$root/docs/comment-kubeflow-istio.png" 2400
	# The same plan as the HTML report (-o html), as a browser opens it.
	(cd "$work/kf-history" && "$work/kplan" diff --base d04e9b4~1 --head d04e9b4 --format html > "$work/istio.html" 2>/dev/null) || true
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
		--disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$work/chromium" \
		--window-size=1300,1800 --screenshot="$root/docs/html-report-kubeflow-istio.png" "file://$work/istio.html" >/dev/null 2>&1
	echo "screenshots: wrote $root/docs/html-report-kubeflow-istio.png"
else
	echo "screenshots: no $history (KPLAN_CORPUS_HISTORY): the Istio bump is not shot" >&2
fi
