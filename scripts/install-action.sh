#!/usr/bin/env bash
# Installs the kplan-action binary for the composite action (action.yml).
#
#   install-action.sh           resolve the action's ref to a release, then
#                               download, verify and cache its binary, or
#                               say the action must be built from source
#   install-action.sh build     build the binary from the action's source
#
# It writes step outputs to $GITHUB_OUTPUT: bin (the binary to run) and
# version; or source=true with go-version-file and go-sum when the ref is
# not a release (uses: ./, a branch, a commit no release tag points at).
#
# Environment (the runner sets the RUNNER_* and GITHUB_* ones):
#   KPLAN_ACTION_REF         github.action_ref: v1.2.3, v1, a branch, a SHA, or empty
#   KPLAN_ACTION_REPOSITORY  github.action_repository (default kplan-dev/kplan)
#   KPLAN_RELEASE_URL        base of the release downloads (default
#                            $GITHUB_SERVER_URL/<repository>/releases/download);
#                            the files are <base>/<tag>/<name>. Unreachable,
#                            it is an error naming it, never a source build
#   KPLAN_GIT_URL            the repository to resolve v1, branches and SHAs
#                            against with git ls-remote (default
#                            $GITHUB_SERVER_URL/<repository>.git)
#   RUNNER_OS, RUNNER_ARCH   Linux or macOS; X64 or ARM64
#   RUNNER_TOOL_CACHE        where verified binaries are kept (else RUNNER_TEMP)
#   GITHUB_ACTION_PATH       the action's files (for the source build)
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }
fail() {
	# ::error:: makes an annotation on GitHub and is plain text elsewhere.
	printf '::error title=kplan install::%s\n' "$*" >&2
	exit 1
}
output() {
	if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
		printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
	fi
}
now_ms() {
	local t
	t=$(date +%s%N 2>/dev/null)
	if [[ "$t" == *N ]]; then # BSD date: no %N
		t=$(($(date +%s) * 1000000000))
	fi
	echo $((t / 1000000))
}
sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

repository=${KPLAN_ACTION_REPOSITORY:-kplan-dev/kplan}
server=${GITHUB_SERVER_URL:-https://github.com}
tmp_root=${RUNNER_TEMP:-${TMPDIR:-/tmp}}

source_build() {
	# $1: why. The next steps set up Go and run `install-action.sh build`.
	log "kplan: $1; building kplan-action from source"
	local dir=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}
	output source true
	output go-version-file "$dir/go.mod"
	output go-sum "$dir/go.sum"
	exit 0
}

build() {
	local dir=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}
	local out="$tmp_root/kplan-action-source/kplan-action"
	local start
	start=$(now_ms)
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -o "$out" ./cmd/action)
	log "kplan: built kplan-action from $dir in $(($(now_ms) - start)) ms"
	output bin "$out"
	output version source
}

# resolve_tag prints the release tag for the action's ref, or nothing when
# no release tag names the ref's commit.
resolve_tag() {
	local ref=$1
	if [[ "$ref" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
		echo "$ref"
		return
	fi
	# v1, v1.2, a branch or a commit: the release tag on the same commit.
	local url=${KPLAN_GIT_URL:-$server/$repository.git} refs commit
	# Unreachable is an error, never a source build: building takes minutes
	# of CPU, and a runner that cannot reach the repository cannot reach its
	# releases either.
	local err
	if ! refs=$(git ls-remote --tags --heads "$url" 2>"$tmp_root/kplan-ls-remote.err"); then
		err=$(tail -n 1 "$tmp_root/kplan-ls-remote.err")
		fail "cannot reach $url (KPLAN_GIT_URL) to find the release of $repository@$ref: $err; set KPLAN_GIT_URL and KPLAN_RELEASE_URL to a mirror of the repository and of its release downloads this runner can reach, or pin the action to a release (@vX.Y.Z)"
	fi
	if [[ "$ref" =~ ^[0-9a-f]{40}$ ]]; then
		commit=$ref
	else
		# An annotated tag's commit is on its ^{} line, which sorts after it.
		commit=$(awk -v t="refs/tags/$ref" -v h="refs/heads/$ref" \
			'$2 == t || $2 == t"^{}" { c = $1 } $2 == h && c == "" { b = $1 } END { print (c != "" ? c : b) }' <<<"$refs")
	fi
	[[ -n "$commit" ]] || return 0
	# The release tags of that commit (peeled); a final release rather than a
	# prerelease, the highest version.
	local tags final
	tags=$(awk -v c="$commit" '$1 == c { sub("^refs/tags/", "", $2); sub("\\^\\{\\}$", "", $2); print $2 }' <<<"$refs" |
		grep -E '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$' || true)
	final=$(grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' <<<"$tags" | sort -t. -k1.2,1n -k2,2n -k3,3n | tail -n 1 || true)
	if [[ -n "$final" ]]; then
		echo "$final"
	else
		sort <<<"$tags" | tail -n 1
	fi
}

install() {
	local ref=${KPLAN_ACTION_REF:-}
	if [[ -z "$ref" ]]; then
		source_build "the action runs from a local path (uses: ./)"
	fi
	local os arch
	case "${RUNNER_OS:-}" in
	Linux) os=linux ;;
	macOS) os=darwin ;;
	*) fail "kplan releases have no binary for runner OS '${RUNNER_OS:-}' (Linux and macOS only)" ;;
	esac
	case "${RUNNER_ARCH:-}" in
	X64) arch=amd64 ;;
	ARM64) arch=arm64 ;;
	*) fail "kplan releases have no binary for runner architecture '${RUNNER_ARCH:-}' (X64 and ARM64 only)" ;;
	esac

	local tag
	tag=$(resolve_tag "$ref")
	if [[ -z "$tag" ]]; then
		source_build "no release tag (vX.Y.Z) names the commit of $repository@$ref"
	fi
	local version=${tag#v} # goreleaser's {{ .Version }}
	local archive="kplan-action_${version}_${os}_${arch}.tar.gz"
	local checksums="kplan_${version}_checksums.txt"
	local dir="${RUNNER_TOOL_CACHE:-$tmp_root}/kplan-action/$version/$arch"
	local bin="$dir/kplan-action"
	local start
	start=$(now_ms)

	# The tool cache: a binary this script verified earlier on this runner
	# (self-hosted runners keep it; hosted runners start empty). Its sha256
	# is kept beside it and checked again.
	if [[ -x "$bin" && -f "$dir.complete" ]] && [[ "$(sha256 "$bin")" == "$(cat "$dir.complete")" ]]; then
		log "kplan: kplan-action $version ($os/$arch) from the tool cache in $(($(now_ms) - start)) ms"
		output bin "$bin"
		output version "$version"
		return
	fi

	local base=${KPLAN_RELEASE_URL:-$server/$repository/releases/download}
	base=${base%/}
	local work
	work=$(mktemp -d "$tmp_root/kplan-install.XXXXXX")
	# shellcheck disable=SC2064 # expand now: work is local
	trap "rm -rf '$work'" EXIT
	local curl=(curl --fail --silent --show-error --location --retry 2 --connect-timeout 10 --max-time 60)
	# download URL FILE: curl's own message says whether the release is
	# missing (HTTP 404) or unreachable (DNS, connection, timeout); either
	# way the error names KPLAN_RELEASE_URL, where the downloads come from.
	download() {
		local msg
		if ! msg=$("${curl[@]}" -o "$2" "$1" 2>&1); then
			fail "cannot download $1: ${msg##*curl: }: is there a release $tag of $repository with its assets, and can this runner reach $base (KPLAN_RELEASE_URL)? Set KPLAN_RELEASE_URL to a mirror of the release downloads it can reach"
		fi
	}
	download "$base/$tag/$checksums" "$work/$checksums"
	download "$base/$tag/$archive" "$work/$archive"

	local want got
	want=$(awk -v f="$archive" '$2 == f || $2 == "*"f { print $1; exit }' "$work/$checksums")
	[[ -n "$want" ]] || fail "$checksums of $tag lists no $archive; refusing to install"
	got=$(sha256 "$work/$archive")
	if [[ "$got" != "$want" ]]; then
		fail "checksum mismatch for $archive from $base/$tag: $checksums says sha256 $want, the download has $got; refusing to install"
	fi

	mkdir -p "$work/x"
	tar -xzf "$work/$archive" -C "$work/x" kplan-action || fail "$archive has no kplan-action"
	mkdir -p "$dir"
	rm -f "$dir.complete"
	mv -f "$work/x/kplan-action" "$bin.$$"
	chmod 0755 "$bin.$$"
	mv -f "$bin.$$" "$bin"
	sha256 "$bin" >"$dir.complete"
	log "kplan: kplan-action $version ($os/$arch) downloaded and verified in $(($(now_ms) - start)) ms"
	output bin "$bin"
	output version "$version"
}

case "${1:-install}" in
install) install ;;
build) build ;;
*) fail "usage: install-action.sh [install|build]" ;;
esac
