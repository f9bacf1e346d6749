#!/bin/sh
# Installs Debian's chromium for the browser tests (internal/browsertest)
# when no Chromium is on PATH, quietly: `make test` runs it on a fresh
# machine that has only Go. The package lists are refreshed only when
# they do not know chromium yet (a fresh image ships none). Needs root,
# or sudo. KPLAN_CHROMIUM, when set, names the browser to use instead.
set -eu
if [ -n "${KPLAN_CHROMIUM:-}" ]; then
	command -v "$KPLAN_CHROMIUM" >/dev/null 2>&1 && exit 0
	echo "install-chromium: KPLAN_CHROMIUM=$KPLAN_CHROMIUM is not a program" >&2
	exit 1
fi
for b in chromium chromium-browser google-chrome; do
	command -v "$b" >/dev/null 2>&1 && exit 0
done
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: no Chromium on PATH and no apt-get to install Debian's: install Chromium, or set KPLAN_CHROMIUM to one" >&2
	exit 1
fi
sudo=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "install-chromium: installing chromium needs root (apt-get install chromium)" >&2; exit 1; }
	sudo=sudo
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt (an unattended upgrade) rather than fail.
apt="$sudo apt-get -q -o DPkg::Lock::Timeout=300"
t0=$(date +%s)
echo "install-chromium: installing Debian's chromium for the browser tests (once; about 30 s)"
if [ -z "$(apt-cache policy chromium 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ]; then
	$apt update >"$log" 2>&1 || { cat "$log" >&2; echo "install-chromium: apt-get update failed" >&2; exit 1; }
fi
$apt install -y chromium >"$log" 2>&1 || { tail -n 30 "$log" >&2; echo "install-chromium: apt-get install chromium failed" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || { echo "install-chromium: chromium installed but not on PATH" >&2; exit 1; }
echo "install-chromium: $(chromium --version 2>/dev/null || echo chromium) in $(( $(date +%s) - t0 ))s"
