#!/usr/bin/env bash
# Real-editor test of next-edit suggestions in Helix (editors/helix/languages.toml), under tmux.
#
# Opens src/next_edit.rs, renames the local `count` at its declaration to `total` as a person would (search
# `count`, `c`, the new name typed, Esc); then, for each other use, selects it (`n`), opens the code-action menu
# (`Space a`) and picks "Spark next edit: `count` → `total`", and checks that one more use is renamed on the
# screen; saves, and checks that the file is the fixture with every `count` renamed and nothing else changed.
# Environment: HX, HELIX_RUNTIME, SPARK_LSP_BIN, SPARK_REPO_ROOT, SCRATCH (with workspace/), SPARK_SCREENSHOTS.
set -euo pipefail

: "${HX:?}" "${HELIX_RUNTIME:?}" "${SPARK_LSP_BIN:?}" "${SPARK_REPO_ROOT:?}" "${SCRATCH:?}"
SOCKET=spark-hx-next-$$
WS=$SCRATCH/workspace
FILE=$WS/src/next_edit.rs
SCREENSHOTS=${SPARK_SCREENSHOTS:-$SCRATCH}

tmux_() { tmux -L "$SOCKET" "$@"; }
cleanup() { tmux_ kill-server 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; echo "--- screen:" >&2; tmux_ capture-pane -p >&2 2>/dev/null || true; exit 1; }
screen() { tmux_ capture-pane -p; }

# wait_screen SECONDS PATTERN: waits until the screen matches the extended regex PATTERN.
wait_screen() {
  local deadline=$((SECONDS + $1))
  until screen | grep -Eq -- "$2"; do
    [ $SECONDS -lt $deadline ] || fail "timed out waiting for /$2/ on the screen"
    sleep 0.1
  done
}

# The shipped languages.toml as it is; `spark-lsp` resolves through PATH to the binary under test, rust-analyzer is
# left off PATH so that the code actions are Spark's only. No completion menu pops up while the new name is typed.
mkdir -p "$SCRATCH/bin" "$XDG_CONFIG_HOME/helix"
ln -sf "$SPARK_LSP_BIN" "$SCRATCH/bin/spark-lsp"
cp "$SPARK_REPO_ROOT/editors/helix/languages.toml" "$XDG_CONFIG_HOME/helix/languages.toml"
cat >"$XDG_CONFIG_HOME/helix/config.toml" <<'TOML'
[editor]
auto-completion = false
auto-pairs = false
TOML
export PATH=$SCRATCH/bin:/usr/local/bin:/usr/bin:/bin

before=$(cat "$FILE"; echo x)
before=${before%x}
grep -q '^    let mut count = 0;$' "$FILE" || fail "unexpected fixture: no '    let mut count = 0;'"

tmux_ new-session -d -x 120 -y 32 -c "$WS" \
  env PATH="$PATH" HOME="$HOME" XDG_CONFIG_HOME="$XDG_CONFIG_HOME" HELIX_RUNTIME="$HELIX_RUNTIME" COLORTERM=truecolor \
  SPARK_MODEL="${SPARK_MODEL:-}" "$HX" src/next_edit.rs
wait_screen 10 'let mut count = 0;'

# The rename at the declaration: the search selects the first `count` (line 3), `c` replaces it.
tmux_ send-keys /count Enter
sleep 0.3
tmux_ send-keys c
tmux_ send-keys -l 'total'
sleep 0.2
# A pause after Escape: an Escape followed at once by another key can read as Alt-<key> in a terminal.
tmux_ send-keys Escape
sleep 0.5
wait_screen 5 'let mut total = 0;'

# Each other use in turn: the next `count` selected (`n`), the code actions there (`Space a`), the "Spark next edit"
# entry for it picked. The server may not have the edit yet: ask again until the menu holds it.
screen_count() { screen | grep -o '\bcount\b' | wc -l; }
entry='Spark next edit: .count. → .total.'
for round in 1 2 3; do
  left=$(screen_count)
  [ "$left" -eq $((4 - round)) ] || fail "round $round: $left uses of count on the screen, expected $((4 - round))"
  tmux_ send-keys n
  sleep 0.3
  actions=""
  for attempt in 1 2 3 4 5; do
    tmux_ send-keys Space a
    deadline=$((SECONDS + 10))
    until actions=$(screen | grep -E 'Spark' || true); echo "$actions" | grep -v 'apply all' | grep -q "$entry"; do
      [ $SECONDS -lt $deadline ] || break
      sleep 0.1
    done
    echo "$actions" | grep -v 'apply all' | grep -q "$entry" && break
    echo "round $round: no '$entry' in the code-action menu (attempt $attempt): $actions; asking again"
    tmux_ send-keys Escape
    sleep 1
  done
  echo "$actions" | grep -v 'apply all' | grep -q "$entry" || fail "round $round: no '$entry' in the code-action menu"
  echo "round $round, code-action menu rows:"
  echo "$actions"
  [ "$round" -eq 1 ] && tmux_ capture-pane -e -p >"$SCRATCH/next-edit-actions.ansi"
  # The first entry is selected when the menu opens; move down to this use's next edit.
  index=$(echo "$actions" | grep -n "$entry" | grep -v 'apply all' | head -n1 | cut -d: -f1)
  for _ in $(seq 2 "$index"); do tmux_ send-keys Down; sleep 0.1; done
  tmux_ send-keys Enter
  deadline=$((SECONDS + 10))
  until [ "$(screen_count)" -eq $((3 - round)) ]; do
    [ $SECONDS -lt $deadline ] || fail "round $round: the next edit did not rename one use"
    sleep 0.1
  done
done
sleep 0.3
tmux_ send-keys -l ':w'
tmux_ send-keys Enter
deadline=$((SECONDS + 10))
until grep -q '^    total$' "$FILE"; do
  [ $SECONDS -lt $deadline ] || fail "the next edits were not saved"
  sleep 0.1
done
sleep 0.3
after=$(cat "$FILE"; echo x)
after=${after%x}

python3 - "$before" "$after" <<'PY'
import sys
before, after = sys.argv[1], sys.argv[2]
assert before.count("count") == 4, f"unexpected fixture: {before!r}"
expected = before.replace("count", "total")
assert after == expected, f"after the next edits the file is\n{after}\nexpected\n{expected}"
print("renamed:\n" + after)
PY

if command -v aha >/dev/null && command -v chromium >/dev/null; then
  mkdir -p "$SCREENSHOTS"
  aha --black --title "Spark next edit in Helix" <"$SCRATCH/next-edit-actions.ansi" >"$SCRATCH/next-edit-actions.html"
  timeout 30 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,700 \
    --screenshot="$SCREENSHOTS/helix-next-edit.png" "file://$SCRATCH/next-edit-actions.html" >/dev/null 2>&1 || true
fi
echo PASS
