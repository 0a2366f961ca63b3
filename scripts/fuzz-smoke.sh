#!/usr/bin/env bash
# A short fuzz run of every cargo-fuzz target (default 20 s each; FUZZ_SECS to change), part of `make test`.
# Installs what it needs when missing: the pinned nightly (rustup) and cargo-fuzz (cargo install). The nightly is
# pinned by date (FUZZ_TOOLCHAIN, default below); an installed plain `nightly` whose manifest carries that date is
# the same toolchain and is used as is, so a machine without access to rustup's servers runs it too. The targets
# build without llama.cpp (spark-engine's `local` feature off), optimised, with debug assertions and overflow
# checks. No sanitizer by default (FUZZ_SANITIZER=address for one): the code under test is safe Rust, the C it
# calls (tree-sitter) is not instrumented either way, and ASan doubled the build (11 min against 5.5 here) and
# cut the pure-Rust targets to a fifth of their executions. Corpora and crashes stay in fuzz/corpus and
# fuzz/artifacts (ignored).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${FUZZ_SECS:-20}"
sanitizer="${FUZZ_SANITIZER:-none}"
pinned="${FUZZ_TOOLCHAIN:-nightly-2026-05-20}"
toolchain="$pinned"
if ! rustup toolchain list | grep -q "^$pinned"; then
    manifest="$(rustup toolchain list -v | awk '$1 ~ /^nightly-[a-z0-9_]+-/ && $1 !~ /^nightly-20/ {print $NF; exit}')/lib/rustlib/multirust-channel-manifest.toml"
    if [[ "$pinned" == nightly-20* && -f "$manifest" ]] && grep -q "^date = \"${pinned#nightly-}\"" "$manifest"; then
        toolchain=nightly
    else
        rustup toolchain install "$pinned" --profile minimal
    fi
fi
echo "== fuzz toolchain: $toolchain ($(cargo +"$toolchain" --version))"
if ! cargo +"$toolchain" fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
targets=$(cargo +"$toolchain" fuzz list) || { echo "fuzz: 0 passed, 1 failed (cannot list the targets)"; exit 1; }
passed=0
failed=0
for target in $targets; do
    echo "== fuzz $target for ${secs}s"
    if cargo +"$toolchain" fuzz run --sanitizer "$sanitizer" "$target" -- -max_total_time="$secs" -max_len=4096; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
# Read by scripts/test-all.sh: one target run is one test.
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
