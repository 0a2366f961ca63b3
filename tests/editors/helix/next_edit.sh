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

source "$(dirname "$0")/harness.sh"

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

read_exact before "$FILE"
grep -q '^    let mut count = 0;$' "$FILE" || fail "unexpected fixture: no '    let mut count = 0;'"

start_helix src/next_edit.rs
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
  pick_code_action "$entry" 'apply all' "$([ "$round" -eq 1 ] && echo "$SCRATCH/next-edit-actions.ansi")"
  deadline=$((SECONDS + 10))
  until [ "$(screen_count)" -eq $((3 - round)) ]; do
    [ $SECONDS -lt $deadline ] || fail "round $round: the next edit did not rename one use"
    sleep 0.1
  done
done
sleep 0.3
save_until "$FILE" '^    total$' "the next edits"
sleep 0.3
read_exact after "$FILE"

python3 - "$before" "$after" <<'PY'
import sys
before, after = sys.argv[1], sys.argv[2]
assert before.count("count") == 4, f"unexpected fixture: {before!r}"
expected = before.replace("count", "total")
assert after == expected, f"after the next edits the file is\n{after}\nexpected\n{expected}"
print("renamed:\n" + after)
PY

screenshot "$SCRATCH/next-edit-actions.ansi" "Spark next edit in Helix" helix-next-edit.png
echo PASS
