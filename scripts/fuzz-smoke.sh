#!/usr/bin/env bash
# A short fuzz run of every cargo-fuzz target (default 20 s each; FUZZ_SECS to change), part of `make test`.
# Installs what it needs when missing: a nightly toolchain (rustup) and cargo-fuzz (cargo install). The targets
# build without llama.cpp (spark-engine's `local` feature off), optimised, with debug assertions and overflow
# checks. No sanitizer by default (FUZZ_SANITIZER=address for one): the code under test is safe Rust, the C it
# calls (tree-sitter) is not instrumented either way, and ASan doubled the build (11 min against 5.5 here) and
# cut the pure-Rust targets to a fifth of their executions. Corpora and crashes stay in fuzz/corpus and
# fuzz/artifacts (ignored).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${FUZZ_SECS:-20}"
sanitizer="${FUZZ_SANITIZER:-none}"
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
for target in $(cargo +nightly fuzz list); do
    echo "== fuzz $target for ${secs}s"
    cargo +nightly fuzz run --sanitizer "$sanitizer" "$target" -- -max_total_time="$secs" -max_len=4096
done
