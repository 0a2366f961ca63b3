#!/usr/bin/env bash
# Real-editor test of editors/helix/languages.toml: Helix under tmux, spark-lsp as an extra language server.
#
# Types in a Rust file, asks for completion (Ctrl-x), checks that Spark's suggestion shows in the completion menu,
# accepts it (Tab, Enter), saves, and checks that the file changed by exactly one non-empty insertion at the
# cursor whose first line is what the menu showed; then opens a file with a missing `;`, applies the Spark fix from
# the code-action menu (`Space a`), saves, and checks that the file changed by exactly the `;`.
# Environment: HX, HELIX_RUNTIME, SPARK_LSP_BIN, SPARK_REPO_ROOT, SCRATCH (with workspace/), SPARK_SCREENSHOTS.
set -euo pipefail

: "${HX:?}" "${HELIX_RUNTIME:?}" "${SPARK_LSP_BIN:?}" "${SPARK_REPO_ROOT:?}" "${SCRATCH:?}"
SOCKET=spark-hx-$$
WS=$SCRATCH/workspace
FILE=$WS/src/main.rs
SCREENSHOTS=${SPARK_SCREENSHOTS:-$SCRATCH}

source "$(dirname "$0")/harness.sh"

# The shipped languages.toml, with one line added to its `inline` table: the default model rates its guess after
# `let y = max(` at 0.17, under the default inline.minConfidence (0.25), so the gate is opened; the test is about
# Helix's menu. `spark-lsp` resolves through PATH to the binary under test. rust-analyzer is left off PATH so that
# the menu holds Spark's items only and the model has the CPU to itself.
mkdir -p "$SCRATCH/bin" "$XDG_CONFIG_HOME/helix"
ln -sf "$SPARK_LSP_BIN" "$SCRATCH/bin/spark-lsp"
sed 's/^\[language-server\.spark\.config\.inline\]$/&\nminConfidence = 0.0/' \
  "$SPARK_REPO_ROOT/editors/helix/languages.toml" >"$XDG_CONFIG_HOME/helix/languages.toml"
grep -q '^minConfidence = 0.0$' "$XDG_CONFIG_HOME/helix/languages.toml" || fail "languages.toml has no inline table"
cat >"$XDG_CONFIG_HOME/helix/config.toml" <<'TOML'
[editor]
completion-trigger-len = 1
idle-timeout = 50
auto-pairs = false
TOML
export PATH=$SCRATCH/bin:/usr/local/bin:/usr/bin:/bin

health=$("$HX" --health rust 2>&1 | sed "s/\x1b\[[0-9;]*m//g")
echo "$health" | grep -q "spark: $SCRATCH/bin/spark-lsp" || fail "hx --health rust does not list spark: $health"

start_helix src/main.rs
wait_screen 10 'fn add\(a: i32'

# A new line after `println!`, saved, so that the text before the completion is known exactly.
tmux_ send-keys /println Enter
sleep 0.3
tmux_ send-keys o
tmux_ send-keys -l 'let y = max('
# A pause after Escape: an Escape followed at once by `:` reads as Alt-: in a terminal.
tmux_ send-keys Escape
sleep 0.3
save_until "$FILE" 'let y = max($' "the typed line"
read_exact before "$FILE"
tmux_ send-keys A
sleep 0.3
baseline=$(screen)

# The model loads in the background and answers empty until then: ask again until the menu opens.
menu=""
deadline=$((SECONDS + 60))
while [ -z "$menu" ]; do
  [ $SECONDS -lt $deadline ] || fail "no completion menu within 60 s"
  tmux_ send-keys C-x
  for _ in $(seq 1 30); do
    sleep 0.1
    now=$(screen)
    # Rows that differ from the screen before Ctrl-x, leaving out the two bottom rows (status and messages).
    menu=$(diff <(echo "$baseline" | head -n -2) <(echo "$now" | head -n -2) | sed -n 's/^> //p' || true)
    [ -n "$menu" ] && break
  done
done
echo "menu rows:"
echo "$menu"
tmux_ capture-pane -e -p >"$SCRATCH/menu.ansi"

tmux_ send-keys Tab
sleep 0.3
tmux_ send-keys Enter
sleep 0.3
tmux_ send-keys Escape
sleep 0.3
tmux_ send-keys -l ':w'
tmux_ send-keys Enter
deadline=$((SECONDS + 10))
while [ "$(cat "$FILE"; echo x)" = "${before}x" ]; do
  [ $SECONDS -lt $deadline ] || fail "accepting the completion did not change the file"
  sleep 0.1
done
sleep 0.3
read_exact after "$FILE"

python3 - "$before" "$after" "$menu" <<'PY'
import sys
before, after, menu = sys.argv[1], sys.argv[2], sys.argv[3]
marker = "let y = max("
offset = before.index(marker) + len(marker)
inserted_len = len(after) - len(before)
assert inserted_len > 0, f"the file did not grow: {after!r}"
inserted = after[offset:offset + inserted_len]
assert after == before[:offset] + inserted + before[offset:], (
    f"the file did not change by one insertion at the cursor:\nbefore={before!r}\nafter={after!r}")
assert inserted.strip(), f"the insertion is blank: {inserted!r}"
first_line = inserted.split("\n")[0].strip()
shown = first_line[:12]
assert not shown or shown in menu, f"the menu {menu!r} did not show the inserted text {first_line!r}"
print(f"inserted at the cursor: {inserted!r}")
PY

# Spark fix through the code-action menu: a file with a missing `;`, the cursor on that line, `Space a`, the
# Spark fix entry picked, Enter, `:w`; the file must change by exactly the `;`.
FIX_FILE=$WS/src/total.rs
read_exact fix_before "$FIX_FILE"
tmux_ send-keys -l ':o src/total.rs'
tmux_ send-keys Enter
wait_screen 10 'let sum: u32 = prices\.iter\(\)\.sum\(\)'
tmux_ send-keys -l ':2'
tmux_ send-keys Enter
sleep 0.3
pick_code_action 'Spark fix' '^$' "$SCRATCH/actions.ansi"
wait_screen 15 'prices\.iter\(\)\.sum\(\);'
save_until "$FIX_FILE" 'prices\.iter()\.sum();' "the Spark fix"
sleep 0.3
read_exact fix_after "$FIX_FILE"
python3 - "$fix_before" "$fix_after" <<'PY'
import sys
before, after = sys.argv[1], sys.argv[2]
lines = before.split("\n")
assert lines[1] == "    let sum: u32 = prices.iter().sum()", f"unexpected fixture line 2: {lines[1]!r}"
lines[1] += ";"
expected = "\n".join(lines)
assert after == expected, f"after the Spark fix the file is\n{after}\nexpected\n{expected}"
print(f"Spark fix applied: {after.split(chr(10))[1]!r}")
PY

screenshot "$SCRATCH/menu.ansi" "Spark in Helix" helix-completion-menu.png
screenshot "$SCRATCH/actions.ansi" "Spark fix in Helix" helix-code-actions.png
echo PASS
