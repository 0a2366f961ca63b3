#!/usr/bin/env bash
# Every test suite of `make test`, each run to its end even when another failed: the cargo tests of the workspace,
# the real-editor tests (tests/editors/run.sh) and the fuzz smoke run (scripts/fuzz-smoke.sh). Prints each suite's
# counts and ends with one line, `N passed, N failed`, the sum over all suites. A suite that cannot run or report
# (a build error, a missing script) counts as one failure: nothing is skipped and counted as a pass.
# Exit status: 0 only when nothing failed. Logs: target/test-logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
cargo=${CARGO:-cargo}
logs=target/test-logs
mkdir -p "$logs"
total_passed=0
total_failed=0
lines=()

# record SUITE PASSED FAILED EXIT_STATUS SECONDS: a suite whose status is non-zero has at least one failure.
record() {
  local suite=$1 passed=$2 failed=$3 status=$4 secs=$5
  if [ "$status" != 0 ] && [ "$failed" = 0 ]; then
    failed=1
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  lines+=("$suite: $passed passed, $failed failed ($secs s, log $logs/$suite.log)")
}

# "PASSED FAILED" from a suite's log: summed over cargo's `test result:` lines, or the suite's own last line
# `SUITE: N passed, M failed`.
cargo_counts() {
  awk '/^test result:/ { for (i = 2; i <= NF; i++) { if ($i ~ /^passed/) p += $(i - 1); if ($i ~ /^failed/) f += $(i - 1) } }
       END { print p + 0, f + 0 }' "$1"
}
line_counts() {
  local prefix=$1 file=$2
  grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed" "$file" | tail -1 | awk '{ print $2, $4 }'
}

run_suite() {
  local suite=$1
  shift
  echo "== $suite: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$logs/$suite.log"
  local status=${PIPESTATUS[0]}
  local counts
  case $suite in
    cargo) counts=$(cargo_counts "$logs/$suite.log") ;;
    *) counts=$(line_counts "$suite" "$logs/$suite.log") ;;
  esac
  [ -n "$counts" ] || counts="0 1"
  # shellcheck disable=SC2086
  record "$suite" $counts "$status" $((SECONDS - start))
}

run_suite cargo "$cargo" test --release --workspace --no-fail-fast
run_suite editors bash tests/editors/run.sh
run_suite fuzz bash scripts/fuzz-smoke.sh

# failures SUITE: one line per failed test of a suite's log, its name and where and why it panicked, so that the
# last lines of a CI run say what failed without the logs (at most 12 lines per suite).
failures() {
  local log=$logs/$1.log
  [ -f "$log" ] || return 0
  case $1 in
    cargo)
      # A failed test's block, or a build error when no test ran.
      awk '/^---- .* stdout ----$/ { name = $2; want = 1; next }
           want && /panicked at/ { where = $0; sub(/.*panicked at /, "", where); getline why
                                   print "    " name ": " where " " substr(why, 1, 160); want = 0; n++ }
           /^error(\[E[0-9]+\])?: / && !n { print "    " substr($0, 1, 200); n++ }' "$log" | head -12
      ;;
    *) grep -E "FAIL |failed: " "$log" | head -12 | sed 's/^/    /' ;;
  esac
}

echo
for line in "${lines[@]}"; do
  echo "  $line"
  suite=${line%%:*}
  case $line in *" 0 failed"*) ;; *) failures "$suite" ;; esac
done
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" = 0 ]
