# Helpers for the scripts (sourced): long steps that say what they are doing, and show
# everything when they fail.

# step LOG DESCRIPTION COMMAND...
# Runs COMMAND with its output in LOG. Says what it is doing at once and every 15 s while
# it runs (with the last line of its output: swift build's "[123/470] Compiling …"), and
# on failure prints the whole of LOG. Returns COMMAND's exit status.
step() {
  local log=$1 description=$2
  shift 2
  echo "== $description (log: $log)" >&2
  local start=$SECONDS status=0
  "$@" >"$log" 2>&1 &
  local pid=$!
  (
    while sleep 15; do
      kill -0 "$pid" 2>/dev/null || exit 0
      last=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-100)
      echo "   … $((SECONDS - start)) s${last:+: $last}" >&2
    done
  ) &
  local ticker=$!
  wait "$pid" || status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if ((status != 0)); then
    echo "== FAILED: $description (exit status $status); its whole output:" >&2
    cat "$log" >&2
    echo "== (end of $log)" >&2
  fi
  return "$status"
}
