#!/usr/bin/env bash
# The tools spark-eval's independent checks run: the TypeScript compiler and Node's type definitions (pinned by
# tests/eval/tools/package-lock.json, installed with `npm ci` into target/eval/tools, nothing global), and it
# checks that node, npm, python3 and cargo are there (apt-get installs node/npm/python3 when root and missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/target/eval/tools"

missing=()
for command in node npm python3 cargo; do
    command -v "$command" >/dev/null 2>&1 || missing+=("$command")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [[ ! " ${missing[*]} " =~ " cargo " ]]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm python3 >/dev/null
    else
        echo "install-eval-tools: missing ${missing[*]} (node >= 18, npm, python3, cargo)" >&2
        exit 1
    fi
fi

mkdir -p "$tools"
if ! cmp -s "$root/tests/eval/tools/package-lock.json" "$tools/package-lock.json" || [ ! -x "$tools/node_modules/.bin/tsc" ]; then
    cp "$root/tests/eval/tools/package.json" "$root/tests/eval/tools/package-lock.json" "$tools/"
    (cd "$tools" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
echo "eval tools: $("$tools/node_modules/.bin/tsc" --version), node $(node --version), $(python3 --version)"
