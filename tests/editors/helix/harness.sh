# Shared by the Helix tests (sourced): Helix under tmux, the screen, waiting, the code-action menu and saving.
# The sourcing script sets SOCKET before sourcing; SCRATCH, SCREENSHOTS are set by it too.

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

# start_helix FILE: Helix on FILE (relative to $WS) in a fresh tmux session, with the test's environment.
start_helix() {
  tmux_ new-session -d -x 120 -y 32 -c "$WS" \
    env PATH="$PATH" HOME="$HOME" XDG_CONFIG_HOME="$XDG_CONFIG_HOME" HELIX_RUNTIME="$HELIX_RUNTIME" COLORTERM=truecolor \
    SPARK_MODEL="${SPARK_MODEL:-}" "$HX" "$1"
}

# pick_code_action ENTRY [SKIP] [ANSI_FILE]: opens the code-action menu (`Space a`) until a row matches the regex
# ENTRY (rows matching SKIP left out; the server may not have computed it yet, so it asks again), saves the
# screen to ANSI_FILE when given, moves down to the first such row and picks it. Sets ACTIONS to the menu's rows.
pick_code_action() {
  local entry=$1 skip=${2:-^$} ansi=${3:-} attempt deadline index
  ACTIONS=""
  for attempt in 1 2 3 4 5; do
    tmux_ send-keys Space a
    deadline=$((SECONDS + 10))
    until ACTIONS=$(screen | grep -E 'Spark' || true); echo "$ACTIONS" | grep -Ev -- "$skip" | grep -Eq -- "$entry"; do
      [ $SECONDS -lt $deadline ] || break
      sleep 0.1
    done
    echo "$ACTIONS" | grep -Ev -- "$skip" | grep -Eq -- "$entry" && break
    echo "no '$entry' in the code-action menu (attempt $attempt): $ACTIONS; asking again"
    tmux_ send-keys Escape
    sleep 1
  done
  echo "$ACTIONS" | grep -Ev -- "$skip" | grep -Eq -- "$entry" || fail "no '$entry' in the code-action menu"
  echo "code-action menu rows:"
  echo "$ACTIONS"
  [ -z "$ansi" ] || tmux_ capture-pane -e -p >"$ansi"
  # The first entry is selected when the menu opens; move down to the one asked for.
  index=$(echo "$ACTIONS" | grep -nE -- "$entry" | grep -Ev -- "$skip" | head -n1 | cut -d: -f1)
  for _ in $(seq 2 "$index"); do tmux_ send-keys Down; sleep 0.1; done
  tmux_ send-keys Enter
}

# save_until FILE PATTERN WHAT: `:w`, then waits until FILE has a line matching the basic regex PATTERN.
save_until() {
  local deadline
  tmux_ send-keys -l ':w'
  tmux_ send-keys Enter
  deadline=$((SECONDS + 10))
  until grep -q -- "$2" "$1"; do
    [ $SECONDS -lt $deadline ] || fail "$3 was not saved"
    sleep 0.1
  done
}

# read_exact VAR FILE: sets VAR to the file's text exactly (a command substitution would drop trailing newlines).
read_exact() {
  local text
  text=$(cat "$2"; echo x)
  printf -v "$1" '%s' "${text%x}"
}

# screenshot ANSI TITLE PNG: a PNG of a captured screen, when aha and chromium are installed.
screenshot() {
  command -v aha >/dev/null && command -v chromium >/dev/null || return 0
  mkdir -p "$SCREENSHOTS"
  aha --black --title "$2" <"$1" >"$1.html"
  timeout 30 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,700 \
    --screenshot="$SCREENSHOTS/$3" "file://$1.html" >/dev/null 2>&1 || true
}
