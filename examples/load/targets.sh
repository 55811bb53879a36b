#!/usr/bin/env bash
# The durable transaction against the no-op, read so that this host's drift does not
# decide it: ROUNDS rounds, each of the no-op, the no-op with the pop's exchange, the
# broker by hand (raw) and the broker through the SDK, back to back in an order that
# rotates from round to round; each figure is a ratio inside one round, and the table
# gives the median of those ratios and their range. Each client is divided by the
# no-op driven by the same client (raw by raw, SDK by SDK): the client shares the
# machine's two cores with the server, so a cheaper client would otherwise lift its
# ratio by itself. run-all.sh measures each
# configuration once, so the no-op and the broker it is divided by can be minutes and
# a host's mood apart: on 2026-12-03 the same build ran push-kv at 18,900 and at 12,700
# transactions a second within half an hour.
#
#   bash examples/load/targets.sh                      # about 6 minutes
#   ROUNDS=3 DURATION=2 bash examples/load/targets.sh
#   SHAPES=ack-push WORKERS=256 bash examples/load/targets.sh
#
# The figures are those of issue #18's targets 1 and 2: push-kv against the no-op
# parsing the same body, ack-push against the write-only no-op and the no-op with the
# pop, and the write call's p99. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
WORKERS=${WORKERS:-64}
SHAPES=${SHAPES:-"push-kv ack-push"}
PARTITIONS=$((WORKERS > 64 ? WORKERS : 64))

. examples/load/common.sh
trap 'rm -rf "$OUT"' EXIT

started=$(date +%s)
echo "running $ROUNDS rounds per shape, each run ${DURATION}s after ${WARMUP}s warm-up:" >&2
for shape in $SHAPES; do
  kinds="noop-raw noop-sdk raw sdk"
  [ "$shape" != push ] && [ "$shape" != push-kv ] && kinds="noop-raw noop2-raw noop-sdk noop2-sdk raw sdk"
  set -- $kinds
  count=$#
  for round in $(seq "$ROUNDS"); do
    # Rotate the order, so that no configuration is always the first of its round.
    order=()
    for i in $(seq 0 $((count - 1))); do
      k=$(((i + round - 1) % count + 1))
      order+=("${!k}")
    done
    for kind in "${order[@]}"; do
      name="$kind-$shape-$round"
      case $kind in
        noop-*) run "$name" --against-noop --mode "${kind#noop-}" --shape "$shape" -c "$WORKERS" --partitions "$PARTITIONS" ;;
        noop2-*) run "$name" --against-noop --noop-pop --mode "${kind#noop2-}" --shape "$shape" -c "$WORKERS" --partitions "$PARTITIONS" ;;
        raw | sdk) run "$name" --mode "$kind" --shape "$shape" -c "$WORKERS" --partitions "$PARTITIONS" ;;
      esac
    done
  done
done

echo
echo "queen targets, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $WORKERS workers, $ROUNDS rounds of ${DURATION}s runs;"
echo "each ratio is taken inside one round (its runs back to back), then the median over rounds (min to max);"
echo "noop = the no-op parsing the same body, driven by the same client; noop+pop = the same with the pop's exchange; write p99 = the transaction call's."
echo
{
  echo "shape|mode|ops/s (median)|/ noop|/ noop+pop|write p99 ms (median)|cpu us/op (median)|writer us/op (median)"
  for shape in $SHAPES; do
    for mode in raw sdk; do
      tp=$(mktemp) r1=$(mktemp) r2=$(mktemp) p99=$(mktemp) cpu=$(mktemp) wcpu=$(mktemp)
      for round in $(seq "$ROUNDS"); do
        m=$(get "$mode-$shape-$round" .throughput)
        n=$(get "noop-$mode-$shape-$round" .throughput)
        n2=$(get "noop2-$mode-$shape-$round" .throughput 2>/dev/null || true)
        [ -n "$m" ] && echo "$m" >>"$tp"
        [ -n "$m" ] && [ -n "$n" ] && awk -v a="$m" -v b="$n" 'BEGIN { if (b > 0) print a / b }' >>"$r1"
        [ -n "$m" ] && [ -n "$n2" ] && awk -v a="$m" -v b="$n2" 'BEGIN { if (b > 0) print a / b }' >>"$r2"
        get "$mode-$shape-$round" .commit_latency_ms.p99 >>"$p99"
        get "$mode-$shape-$round" .cpu_us_per_op >>"$cpu"
        get "$mode-$shape-$round" .writer_cpu_us_per_op >>"$wcpu"
      done
      echo "$shape|$mode|$(num "$(median <"$tp")")|$(summary "$r1")|$(summary "$r2")|$(awk -v a="$(median <"$p99")" 'BEGIN { if (a == "") print "-"; else printf "%.1f", a }')|$(num "$(median <"$cpu")")|$(num "$(median <"$wcpu")")"
      rm -f "$tp" "$r1" "$r2" "$p99" "$cpu" "$wcpu"
    done
  done
} | column -t -s '|'
for f in "$OUT"/*.json; do
  x=$(jq -r 'select(.input_exhausted == true) | "\(.shape) \(.mode) c=\(.concurrency)"' "$f")
  [ -n "$x" ] && echo "warning: input ran out in $x (throughput is a lower bound)"
  x=$(jq -r 'select((.errors // 0) > 0) | "\(.shape) \(.mode): \(.errors) errors"' "$f")
  [ -n "$x" ] && echo "warning: $x"
done
echo "total $(($(date +%s) - started)) s"
