#!/usr/bin/env bash
# Installs the system packages Spark's build needs (cmake and clang/libclang for llama.cpp's build and
# bindgen, a C++ compiler, pkg-config), with apt-get when run as root. Installs only what is missing.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v c++ >/dev/null 2>&1 || missing+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if ! python3 -m pip --version >/dev/null 2>&1 && ! command -v pip >/dev/null 2>&1; then missing+=(python3-pip); fi
ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || missing+=(libclang-dev)

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: build tools present"
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: missing ${missing[*]}; install them (as root: apt-get install ${missing[*]})" >&2
  exit 1
fi
