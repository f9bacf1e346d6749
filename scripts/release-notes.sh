#!/bin/sh
# release-notes.sh VERSION [CHANGELOG]: the release's notes, the section
# "## [VERSION]" of CHANGELOG.md (Keep a Changelog) without its heading,
# for goreleaser's --release-notes; the release fails when the section is
# missing or empty, rather than publishing every commit subject since the
# start (about 130 KB before v0.1.0).
set -eu
version=${1#v}
changelog=${2:-CHANGELOG.md}
notes=$(awk -v v="$version" '
	/^## \[/ { if (on) exit; if (index($0, "## [" v "]") == 1) { on = 1; next } }
	on { print }
' "$changelog")
if [ -z "$(printf '%s' "$notes" | tr -d '[:space:]')" ]; then
	echo "release-notes.sh: $changelog has no section \"## [$version]\": move the [Unreleased] entries under it in the commit you tag" >&2
	exit 1
fi
printf '%s\n' "$notes"
