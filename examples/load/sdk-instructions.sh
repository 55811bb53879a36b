#!/usr/bin/env bash
# The SDK's own cost as instructions per step, read with far less noise than time: each
# shape's steps run through the SDK, through `--mode raw` (the same bodies over bare
# reqwest, as the SDK uses it) and through `--mode hyper` (over hyper-util's client,
# without reqwest), under callgrind, against a standalone durable broker, so only the
# client's work is counted. Each mode's instructions per step are the worker loop's
# inclusive cost over its operations (the client's start and the pre-fill left out).
#
#   bash examples/load/sdk-instructions.sh                    # about 4 minutes
#   SHAPES=ack-push bash examples/load/sdk-instructions.sh
#   LOAD=/tmp/load-A bash examples/load/sdk-instructions.sh   # another build's `load`
#   ROUNDS=3 bash examples/load/sdk-instructions.sh           # medians of 3 runs of each
#
# Throughput pairs (`sdk-vs-raw.sh`) move by up to 30% from run to run here; these
# counts move by 1 to 2% (how often each future is polled still depends on timing), so
# read a difference of a few percent from ROUNDS=3 or more. What they leave out: time
# that is not instructions (cache misses, page faults, wake-ups), and the CPU's SHA
# extensions, which valgrind hides (derived ids are then hashed by the portable code,
# about 4,600 instructions each, where a native run spends a few hundred).
#
# Needs valgrind (callgrind_annotate) and jq.
set -euo pipefail
cd "$(dirname "$0")/../.."

SHAPES=${SHAPES:-"push-kv ack-push seed-step"}
WORKERS=${WORKERS:-4}
DURATION=${DURATION:-8}
PREFILL=${PREFILL:-6000}
ROUNDS=${ROUNDS:-1}

command -v valgrind >/dev/null || { echo "$(basename "$0") needs valgrind" >&2; exit 1; }
. examples/load/common.sh
BIN=${LOAD:-$BIN}
# The broker the figures were measured on: mimalloc (a feature off by default).
cargo build --release --quiet -p queen-mock-broker --features mimalloc
BROKER=${CARGO_TARGET_DIR:-target}/release/queen-mock-broker
DATA=$(mktemp -d)
PORT=${PORT:-6759}
"$BROKER" --listen "127.0.0.1:$PORT" --data "$DATA/queen.redb" >"$DATA/broker.log" 2>&1 &
BROKER_PID=$!
trap 'kill $BROKER_PID 2>/dev/null; wait $BROKER_PID 2>/dev/null; rm -rf "$OUT" "$DATA"' EXIT
ready=
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && { ready=1; break; }
  sleep 0.1
done
[ -n "$ready" ] || { echo "the broker did not answer on port $PORT:" >&2; cat "$DATA/broker.log" >&2; exit 1; }

# instructions MODE SHAPE: the client's instructions per step of one run.
instructions() {
  local mode=$1 shape=$2 base="$OUT/$1-$2"
  valgrind --tool=callgrind --callgrind-out-file="$base.out" "$BIN" --json \
    --url "http://127.0.0.1:$PORT" --shape "$shape" --mode "$mode" -c "$WORKERS" \
    --duration "$DURATION" --warmup 0 --prefill "$PREFILL" >"$base.json" 2>"$base.err"
  local ops worker
  ops=$(jq -r '.ops' "$base.json")
  worker=$(callgrind_annotate --inclusive=yes "$base.out" 2>/dev/null |
    grep -m1 'queen_load::worker::{{closure}} \[' | awk '{ gsub(",", "", $1); print $1 }')
  awk -v w="$worker" -v n="$ops" 'BEGIN { if (w == "" || n + 0 == 0) print ""; else printf "%.0f", w / n }'
}

echo "queen sdk vs raw in instructions, $(date -u +%Y-%m-%dT%H:%MZ); callgrind, $WORKERS workers, ${DURATION}s, a standalone broker by URL; medians of $ROUNDS run(s) of each"
printf '%-10s %14s %14s %14s %8s %10s %10s\n' shape "sdk instr/op" "raw instr/op" "hyper instr/op" sdk/raw raw/hyper sdk/hyper
for shape in $SHAPES; do
  for mode in sdk raw hyper; do : >"$OUT/$mode-$shape.txt"; done
  for round in $(seq "$ROUNDS"); do
    order="raw sdk hyper"; [ $((round % 2)) -eq 0 ] && order="hyper sdk raw"
    for mode in $order; do
      n=$(instructions "$mode" "$shape")
      if [ -n "$n" ]; then echo "$n" >>"$OUT/$mode-$shape.txt"; else echo "FAILED: $mode $shape (see $OUT)" >&2; fi
    done
  done
  sdk=$(median <"$OUT/sdk-$shape.txt")
  raw=$(median <"$OUT/raw-$shape.txt")
  hyper=$(median <"$OUT/hyper-$shape.txt")
  printf '%-10s %14s %14s %14s %8s %10s %10s\n' "$shape" "$(num "$sdk")" "$(num "$raw")" "$(num "$hyper")" "$(ratio "$sdk" "$raw")" "$(ratio "$raw" "$hyper")" "$(ratio "$sdk" "$hyper")"
done
