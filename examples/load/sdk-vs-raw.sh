#!/usr/bin/env bash
# The SDK's own cost, measured so that this host's noise does not decide it: for each
# shape, ROUNDS pairs of runs (sdk then raw, then raw then sdk, and so on) against a
# fresh embedded durable broker each, and the medians of each mode's throughput and
# process CPU per operation, with their ratio. A single pair moves by up to 30% between
# runs here; the median of alternating pairs is what a difference of a few percent can
# be read from.
#
#   bash examples/load/sdk-vs-raw.sh                    # about 2.5 minutes
#   ROUNDS=9 SHAPES=seed-step bash examples/load/sdk-vs-raw.sh
#   NOOP=1 bash examples/load/sdk-vs-raw.sh             # against the no-op server (with the pop)
#   RAW=hyper bash examples/load/sdk-vs-raw.sh          # the raw bodies over hyper-util, not reqwest
#
# Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
WORKERS=${WORKERS:-64}
SHAPES=${SHAPES:-"push ack-push seed-step"}
NOOP=${NOOP:-}
# The hand-written client the SDK is set against: `raw` (reqwest) or `hyper`.
RAW=${RAW:-raw}

. examples/load/common.sh
trap 'rm -rf "$OUT"' EXIT
target=(); [ -n "$NOOP" ] && target=(--against-noop --noop-pop)

echo "queen sdk vs raw ($RAW), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; $ROUNDS alternating pairs per shape, ${DURATION}s each after ${WARMUP}s warm-up, $WORKERS workers, target: ${NOOP:+no-op server with pop}${NOOP:-embedded durable broker}"
printf '%-10s %12s %12s %8s %14s %14s %10s\n' shape "sdk ops/s" "raw ops/s" sdk/raw "sdk cpu us/op" "raw cpu us/op" "sdk/raw cpu"
for shape in $SHAPES; do
  out=$(mktemp)
  for round in $(seq "$ROUNDS"); do
    # Which mode goes first alternates from pair to pair: in runs back to back the
    # first of a pair was faster more often than not, whichever it was
    # (benchmarks-history.md, tenth round).
    order="sdk $RAW"; [ $((round % 2)) -eq 0 ] && order="$RAW sdk"
    for mode in $order; do
      label=$mode; [ "$mode" = "$RAW" ] && label=raw
      "$BIN" --json --shape "$shape" --mode "$mode" -c "$WORKERS" --duration "$DURATION" --warmup "$WARMUP" "${target[@]}" 2>/dev/null |
        jq -r --arg m "$label" '"\($m) \(.throughput) \(.cpu_us_per_op // 0)"' >>"$out"
    done
  done
  st=$(awk '$1 == "sdk" { print $2 }' "$out" | median)
  rt=$(awk '$1 == "raw" { print $2 }' "$out" | median)
  sc=$(awk '$1 == "sdk" { print $3 }' "$out" | median)
  rc=$(awk '$1 == "raw" { print $3 }' "$out" | median)
  awk -v s="$shape" -v st="$st" -v rt="$rt" -v sc="$sc" -v rc="$rc" \
    'BEGIN { printf "%-10s %12.0f %12.0f %8.2f %14.0f %14.0f %10.2f\n", s, st, rt, st / rt, sc, rc, sc / rc }'
  rm -f "$out"
done
