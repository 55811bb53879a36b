# What the load scripts share; sourced by each of them (not run on its own). It checks
# for jq, builds the `load` binary (BIN), makes the folder of the run's reports (OUT;
# the caller removes it), and defines the helpers below. The caller sets DURATION and
# WARMUP before calling `run`.

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
# median: the median of the numbers on standard input, one a line (empty when none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# summary FILE: "median (min to max)" of the numbers in FILE, "-" when it has none.
summary() {
  [ -s "$1" ] || { echo "-"; return; }
  local m lo hi
  m=$(median <"$1")
  lo=$(sort -g "$1" | head -1)
  hi=$(sort -g "$1" | tail -1)
  awk -v m="$m" -v lo="$lo" -v hi="$hi" 'BEGIN { printf "%.2f (%.2f to %.2f)", m, lo, hi }'
}
