#!/usr/bin/env bash
# A short fuzz run of every cargo-fuzz target (default 20 s each; FUZZ_SECS to change). Needs a nightly
# toolchain and cargo-fuzz; installs cargo-fuzz with cargo when it is missing. The same properties run as
# proptests in `make test` (server/src/document.rs, server/src/position.rs, engine/src/postprocess.rs).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${FUZZ_SECS:-20}"
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz-smoke: no nightly toolchain (rustup toolchain install nightly); the proptests cover the same properties" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
for target in $(cargo +nightly fuzz list); do
    echo "== fuzz $target for ${secs}s"
    cargo +nightly fuzz run --release "$target" -- -max_total_time="$secs" -max_len=4096
done
