#!/usr/bin/env bash
# Installs the TypeScript compiler, pinned, for the tests and the evaluation that type-check TypeScript
# (`verify.compile`, issue 11): `target/tools/node_modules/.bin/tsc`. Idempotent: an install of the pinned
# version is kept and nothing is downloaded. Needs node and npm (scripts/install-deps.sh).
set -euo pipefail

version=5.9.3
root=$(cd "$(dirname "$0")/.." && pwd)
tools=${SPARK_TOOLS_DIR:-$root/target/tools}
tsc=$tools/node_modules/.bin/tsc

if [ -x "$tsc" ] && [ "$("$tsc" --version 2>/dev/null)" = "Version $version" ]; then
  echo "install-tsc: $tsc is TypeScript $version"
  exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "install-tsc: npm is not installed (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$tools"
# A package.json of its own so npm installs here and never walks up into the repository.
[ -f "$tools/package.json" ] || echo '{"name": "spark-tools", "private": true}' > "$tools/package.json"
npm install --prefix "$tools" --no-audit --no-fund --save-exact "typescript@$version" >/dev/null
echo "install-tsc: $("$tsc" --version) at $tsc"
