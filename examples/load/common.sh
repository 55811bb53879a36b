# What the load scripts share; sourced by run-all.sh, partition-curve.sh and
# stored-data.sh (not run on its own). It checks for jq, builds the `load` binary
# (BIN), makes the folder of the run's reports (OUT; the caller removes it), and
# defines the helpers below. The caller sets DURATION and WARMUP before calling `run`.

command -v jq >/dev/null || { echo "$(basename "$0") needs jq (apt-get install jq)" >&2; exit 1; }
cargo build --release --quiet -p queen-load --bin load
BIN=${CARGO_TARGET_DIR:-target}/release/load
OUT=$(mktemp -d)

# run NAME ARGS...: one run of load, its JSON report in $OUT/NAME.json ({} if it failed).
run() {
  local name=$1
  shift
  echo "  $name" >&2
  if ! "$BIN" --json --duration "$DURATION" --warmup "$WARMUP" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
    echo "FAILED: $name ($*)" >&2
    cat "$OUT/$name.err" >&2
    echo '{}' >"$OUT/$name.json"
  fi
}

# get NAME JQ-EXPR: a figure of a run's report (empty when absent).
get() { jq -r "($2) // empty" "$OUT/$1.json"; }
# ratio A B: A / B to two decimals, "-" when either is missing or B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
# num A: A rounded, "-" when missing.
num() { awk -v a="$1" 'BEGIN { if (a == "") print "-"; else printf "%.0f", a }'; }
