#!/usr/bin/env bash
# How push, ack-push and seed-step hold up with lots of stored data (issue #18): each
# shape at WORKERS workers against a fresh embedded durable broker that is empty, then
# against one that first stores (untimed) STORED_MESSAGES messages in a queue of their
# own over STORED_PARTITIONS partitions, STORED_KV KV keys and STORED_TIMERS timers
# pending 30 days ahead, alternating empty/loaded, ROUNDS times. Prints one table of the
# medians with the loaded/empty ratios, measured in the same run of this script.
#
#   bash examples/load/stored-data.sh            # about 4.5 minutes (the loading is most of it)
#   STORED_MESSAGES=50000 STORED_KV=5000 STORED_TIMERS=5000 DURATION=2 bash examples/load/stored-data.sh
#   ROUNDS=3 SHAPES=ack-push bash examples/load/stored-data.sh
#
# Every loaded run loads its own broker (about 75 s for the default 1,000,000 messages,
# 100,000 keys and 100,000 timers on the 2-core host; the table gives the time), so one
# round is the default; on a shared host one pair moves by up to 30%, so read a
# difference of less than that from ROUNDS=3 (about 13 minutes). Partitions of the
# input: max(64, workers). Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."

SHAPES=${SHAPES:-"push ack-push seed-step"}
WORKERS=${WORKERS:-64}
STORED_MESSAGES=${STORED_MESSAGES:-1000000}
STORED_PARTITIONS=${STORED_PARTITIONS:-10000}
STORED_KV=${STORED_KV:-100000}
STORED_TIMERS=${STORED_TIMERS:-100000}
ROUNDS=${ROUNDS:-1}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
MODE=${MODE:-sdk}
PARTITIONS=$((WORKERS > 64 ? WORKERS : 64))

. examples/load/common.sh
trap 'rm -rf "$OUT"' EXIT


# med KIND SHAPE JQ-EXPR: the median over the rounds of a figure of the KIND (empty or
# loaded) runs of SHAPE.
med() {
  for r in $(seq "$ROUNDS"); do jq -r "($3) // empty" "$OUT/$1-$2-$r.json"; done | median
}
# sum KIND SHAPE JQ-EXPR: the sum over the rounds.
sum() {
  for r in $(seq "$ROUNDS"); do jq -r "($3) // 0" "$OUT/$1-$2-$r.json"; done | awk '{ s += $1 } END { print s + 0 }'
}
ms() { awk -v a="$1" 'BEGIN { if (a == "") print "-"; else printf "%.1f", a }'; }

stored=(--stored-messages "$STORED_MESSAGES" --stored-partitions "$STORED_PARTITIONS"
  --stored-kv "$STORED_KV" --stored-timers "$STORED_TIMERS")
started=$(date +%s)
echo "running ($ROUNDS round(s); each ${DURATION}s after ${WARMUP}s warm-up; loaded = $STORED_MESSAGES messages over $STORED_PARTITIONS partitions, $STORED_KV KV keys, $STORED_TIMERS timers):" >&2
for r in $(seq "$ROUNDS"); do
  for shape in $SHAPES; do
    common=(--mode "$MODE" --shape "$shape" -c "$WORKERS" --partitions "$PARTITIONS")
    run "empty-$shape-$r" "${common[@]}"
    run "loaded-$shape-$r" "${common[@]}" "${stored[@]}"
  done
done

echo
echo "queen stored data, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
echo "fresh embedded file-backed (durable) broker per run, $WORKERS workers, $MODE, ${DURATION}s measured after ${WARMUP}s warm-up;"
echo "loaded = stored first (untimed): $STORED_MESSAGES messages in their own queue over $STORED_PARTITIONS partitions, $STORED_KV KV keys, $STORED_TIMERS timers 30 days ahead;"
echo "medians of $ROUNDS alternating empty/loaded run(s); l/e = loaded / empty."
echo
{
  echo "shape|empty ops/s|loaded ops/s|ops l/e|p50 ms e/l|p50 l/e|p99 ms e/l|p99 l/e|cpu us/op e/l|cpu l/e|commits/s e/l|peak RSS MiB e/l|errors e/l|load s"
  for shape in $SHAPES; do
    et=$(med empty "$shape" .throughput)
    lt=$(med loaded "$shape" .throughput)
    e50=$(med empty "$shape" .latency_ms.p50)
    l50=$(med loaded "$shape" .latency_ms.p50)
    e99=$(med empty "$shape" .latency_ms.p99)
    l99=$(med loaded "$shape" .latency_ms.p99)
    ec=$(med empty "$shape" .cpu_us_per_op)
    lc=$(med loaded "$shape" .cpu_us_per_op)
    echo "$shape|$(num "$et")|$(num "$lt")|$(ratio "$lt" "$et")|$(ms "$e50")/$(ms "$l50")|$(ratio "$l50" "$e50")|$(ms "$e99")/$(ms "$l99")|$(ratio "$l99" "$e99")|$(num "$ec")/$(num "$lc")|$(ratio "$lc" "$ec")|$(num "$(med empty "$shape" .group_commit.commits_per_s)")/$(num "$(med loaded "$shape" .group_commit.commits_per_s)")|$(num "$(med empty "$shape" .peak_rss_mib)")/$(num "$(med loaded "$shape" .peak_rss_mib)")|$(sum empty "$shape" .errors)/$(sum loaded "$shape" .errors)|$(ms "$(med loaded "$shape" .stored.load_s)")"
  done
} | column -t -s '|'
echo
for f in "$OUT"/*.json; do
  x=$(jq -r 'select(.input_exhausted == true) | "\(.shape) \(if .stored then "loaded" else "empty" end)"' "$f")
  [ -n "$x" ] && echo "warning: input ran out in $x (throughput is a lower bound)"
done
load=$(cat "$OUT"/*.json | jq -s 'map(.stored.load_s // 0) | add')
# mean FIELD: the mean of .stored.FIELD over the loaded runs, in seconds.
mean() { cat "$OUT"/loaded-*.json | jq -s "map(.stored.$1 // 0) | add / length" | awk '{ printf "%.2f", $1 }'; }
echo "stored-data loading (untimed), mean per loaded run: messages $(mean messages_s) s, KV $(mean kv_s) s, timers $(mean timers_s) s"
echo "total $(($(date +%s) - started)) s, of which loading stored data $(printf '%.0f' "$load") s"
