#!/usr/bin/env bash
# How the cost of a pop behaves as a queue's partition count grows (issue #18, "flat pop
# cost as partitions grow"). For each partition count of PARTITIONS_LIST, the same
# MESSAGES input messages are pre-filled round-robin over that many partitions of a
# fresh embedded durable broker, then one shape runs on it:
#   pop       a wildcard pop of up to BATCH messages, autoAck, no wait (POP_WORKERS workers)
#   pop-ack   a wildcard pop of up to BATCH messages under a lease, then one batch ack
#   GROUP_SHAPE with GROUPS consumer groups (worker i in group g{i % GROUPS},
#             subscription mode all: every group reads the whole input)
# and prints one table: ops/s, msgs/s, latency p50/p99 and CPU per operation, each also
# as a ratio to the same row set's run over the first partition count (64 by default),
# measured in the same run of this script. Each run is one fresh broker: the pre-fill is
# untimed, but it is wall time, so the table gives it too.
#
#   bash examples/load/partition-curve.sh                 # about 3 minutes
#   PARTITIONS_LIST="64 1000" MESSAGES=20000 DURATION=2 bash examples/load/partition-curve.sh
#   BATCH=10 GROUP_SHAPE=pop-ack MODE=raw bash examples/load/partition-curve.sh
#
# GROUPS is also bash's own variable (the user's group ids): `GROUPS=4 bash ...` typed
# in bash does not reach this script, so give CONSUMER_GROUPS=4 (or `env GROUPS=4 bash
# ...`). GROUPS=0 (or CONSUMER_GROUPS=0) drops the group row set. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."

PARTITIONS_LIST=${PARTITIONS_LIST:-"64 1000 10000 100000"}
MESSAGES=${MESSAGES:-200000}
POP_WORKERS=${POP_WORKERS:-16}
BATCH=${BATCH:-1}
NGROUPS=${CONSUMER_GROUPS:-$(printenv GROUPS || echo 8)}
GROUP_SHAPE=${GROUP_SHAPE:-pop}
SHAPES=${SHAPES:-"pop pop-ack"}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
MODE=${MODE:-sdk}

. examples/load/common.sh
trap 'rm -rf "$OUT"' EXIT


ms() { awk -v a="$1" 'BEGIN { if (a == "") print "-"; else printf "%.2f", a }'; }

# The row sets: "label shape groups".
sets=()
for shape in $SHAPES; do sets+=("$shape $shape 0"); done
if [ "$NGROUPS" -gt 0 ]; then sets+=("$GROUP_SHAPE+${NGROUPS}g $GROUP_SHAPE $NGROUPS"); fi

started=$(date +%s)
echo "running ($MESSAGES messages pre-filled per run, ${DURATION}s measured after ${WARMUP}s warm-up, $POP_WORKERS workers, batch $BATCH, $MODE):" >&2
for p in $PARTITIONS_LIST; do
  for set in "${sets[@]}"; do
    read -r label shape groups <<<"$set"
    run "$label-$p" --mode "$MODE" --shape "$shape" -c "$POP_WORKERS" --batch "$BATCH" \
      --groups "$groups" --partitions "$p" --prefill "$MESSAGES"
  done
done

first=$(awk '{print $1}' <<<"$PARTITIONS_LIST")
echo
echo "queen partition curve, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
echo "$MESSAGES input messages pre-filled round-robin per run (untimed), fresh embedded file-backed (durable) broker per run;"
echo "${DURATION}s measured after ${WARMUP}s warm-up, $POP_WORKERS workers, $MODE, at most $BATCH messages per pop, no wait;"
echo "pop = wildcard pop with autoAck; pop-ack = wildcard pop under a lease, then one batch ack (2 requests);"
echo "+Ng = N consumer groups, subscription mode all (each reads the whole input); x$first = ratio to the same row set at $first partitions."
echo
{
  echo "shape|partitions|msgs/partition|ops/s|ops x$first|msgs/s|p50 ms|p50 x$first|p99 ms|p99 x$first|cpu us/op|cpu x$first|empty pops|errors|rollbacks|prefill s|input ran out"
  for set in "${sets[@]}"; do
    read -r label _ _ <<<"$set"
    b="$label-$first"
    for p in $PARTITIONS_LIST; do
      n="$label-$p"
      t=$(get "$n" .throughput)
      p50=$(get "$n" .latency_ms.p50)
      p99=$(get "$n" .latency_ms.p99)
      cpu=$(get "$n" .cpu_us_per_op)
      echo "$label|$p|$(awk -v m="$MESSAGES" -v p="$p" 'BEGIN { printf "%g", m / p }')|$(num "$t")|$(ratio "$t" "$(get "$b" .throughput)")|$(num "$(get "$n" .messages_per_s)")|$(ms "$p50")|$(ratio "$p50" "$(get "$b" .latency_ms.p50)")|$(ms "$p99")|$(ratio "$p99" "$(get "$b" .latency_ms.p99)")|$(num "$cpu")|$(ratio "$cpu" "$(get "$b" .cpu_us_per_op)")|$(get "$n" .empty_pops)|$(get "$n" .errors)|$(get "$n" .rollbacks)|$(awk -v s="$(get "$n" .prefill_s)" 'BEGIN { if (s == "") print "-"; else printf "%.1f", s }')|$(get "$n" '.input_exhausted | tostring')"
    done
  done
} | column -t -s '|'
echo
prefill=$(cat "$OUT"/*.json | jq -s 'map(.prefill_s // 0) | add')
for f in "$OUT"/*.json; do
  x=$(jq -r 'select(.input_exhausted == true) | "\(.shape) groups=\(.groups) partitions=\(.partitions)"' "$f")
  [ -n "$x" ] && echo "warning: input ran out in $x (throughput is a lower bound; raise MESSAGES)"
done
for f in "$OUT"/*.json; do
  x=$(jq -r 'select((.errors // 0) > 0) | "\(.shape) groups=\(.groups) partitions=\(.partitions): \(.error_samples)"' "$f")
  [ -n "$x" ] && echo "errors in $x"
done
echo "total $(($(date +%s) - started)) s, of which pre-fill $(printf '%.0f' "$prefill") s"
