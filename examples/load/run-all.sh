#!/usr/bin/env bash
# Runs the no-op baseline and the four write shapes (push, push-kv, ack-push, seed-step) at 1, 64 and
# 256 workers, in sdk and raw mode, a few seconds each, against a fresh embedded durable
# broker per run, and prints one table with every figure as a ratio of the no-op
# baseline measured in the same run (same body, same workers, in-process like the
# embedded broker). Then one row against the no-op server as a separate process.
#
#   bash examples/load/run-all.sh                 # about 4 minutes
#   DURATION=10 WARMUP=2 bash examples/load/run-all.sh
#   SHAPES=ack-push CONCURRENCY="64 256" bash examples/load/run-all.sh
#
# Partitions: max(64, workers), so that every worker can hold a lease (PARTITIONS sets
# the minimum). Needs jq. Every target is on 127.0.0.1; every run stops by itself.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
CONCURRENCY=${CONCURRENCY:-"1 64 256"}
SHAPES=${SHAPES:-"push push-kv ack-push seed-step"}
PARTITIONS=${PARTITIONS:-64}

. examples/load/common.sh
NOOP_PID=
cleanup() {
  if [ -n "$NOOP_PID" ]; then kill "$NOOP_PID" 2>/dev/null || true; fi
  rm -rf "$OUT"
}
trap cleanup EXIT



started=$(date +%s)
echo "running (each ${DURATION}s after ${WARMUP}s warm-up):" >&2
for shape in $SHAPES; do
  for c in $CONCURRENCY; do
    p=$((c > PARTITIONS ? c : PARTITIONS))
    run "noop-$shape-$c" --against-noop --mode raw --shape "$shape" -c "$c" --partitions "$p"
    if [ "$shape" != push ] && [ "$shape" != push-kv ]; then
      run "noop2-$shape-$c" --against-noop --noop-pop --mode raw --shape "$shape" -c "$c" --partitions "$p"
    fi
    run "sdk-$shape-$c" --mode sdk --shape "$shape" -c "$c" --partitions "$p"
    run "raw-$shape-$c" --mode raw --shape "$shape" -c "$c" --partitions "$p"
  done
done

# The no-op server as its own process (as wrk would measure it), for comparison.
ext_shape=$(echo "$SHAPES" | awk '{print $NF}')
"$BIN" --serve-noop --listen 127.0.0.1:0 --duration 120 >"$OUT/server.out" 2>&1 &
NOOP_PID=$!
for _ in $(seq 100); do
  grep -q "listening on" "$OUT/server.out" 2>/dev/null && break
  sleep 0.1
done
url=$(awk '/listening on/ {print $NF}' "$OUT/server.out")
run "ext-noop" --against-noop --url "$url" --mode raw --shape "$ext_shape" -c 64
kill "$NOOP_PID" 2>/dev/null || true
wait "$NOOP_PID" 2>/dev/null || true
NOOP_PID=

lat() { # NAME: p50/p99/p999 in ms
  local l
  l=$(jq -r '.latency_ms // empty | "\(.p50)/\(.p99)/\(.p999)"' "$OUT/$1.json")
  [ -n "$l" ] && awk -F/ '{printf "%.1f/%.1f/%.1f", $1, $2, $3}' <<<"$l" || echo "-"
}
wp99() { # NAME: the write call's p99 in ms
  jq -r '.commit_latency_ms.p99 // empty' "$OUT/$1.json" | awk '{ if ($1 == "") print "-"; else printf "%.1f", $1 }'
}
gc() { # NAME: commits/s and average batch
  jq -r '.group_commit // empty | "\(.commits_per_s | floor)/s x\(.average_batch * 10 | floor / 10)"' "$OUT/$1.json"
}

echo
echo "queen load, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
echo "${DURATION}s measured per run after ${WARMUP}s warm-up; embedded file-backed (durable) broker, fresh per run;"
echo "noop = the no-op axum server in-process, raw HTTP, same body as the shape's write call (no pop);"
echo "noop+pop = the same with the pop's exchange too (a canned message): the shape's two HTTP exchanges, no broker work;"
echo "ops/s = successful operations (ack-push and seed-step: pop + transaction, 2 requests) per second."
echo
{
  echo "shape|workers|parts|noop ops/s|noop+pop ops/s|sdk ops/s|sdk/noop|sdk/noop+pop|raw ops/s|raw/noop|raw/noop+pop|sdk/raw|sdk p50/p99/p999 ms|raw p50/p99/p999 ms|write call p99 ms sdk/raw|errors sdk/raw|rollbacks sdk/raw|group commit sdk|cpu us/op sdk/raw|peak RSS MiB sdk/raw"
  for shape in $SHAPES; do
    for c in $CONCURRENCY; do
      n=$(get "noop-$shape-$c" .throughput)
      n2=$(get "noop2-$shape-$c" .throughput 2>/dev/null || true)
      s=$(get "sdk-$shape-$c" .throughput)
      r=$(get "raw-$shape-$c" .throughput)
      echo "$shape|$c|$(get "sdk-$shape-$c" .partitions)|$(num "$n")|$(num "$n2")|$(num "$s")|$(ratio "$s" "$n")|$(ratio "$s" "$n2")|$(num "$r")|$(ratio "$r" "$n")|$(ratio "$r" "$n2")|$(ratio "$s" "$r")|$(lat "sdk-$shape-$c")|$(lat "raw-$shape-$c")|$(wp99 "sdk-$shape-$c")/$(wp99 "raw-$shape-$c")|$(get "sdk-$shape-$c" .errors)/$(get "raw-$shape-$c" .errors)|$(get "sdk-$shape-$c" .rollbacks)/$(get "raw-$shape-$c" .rollbacks)|$(gc "sdk-$shape-$c")|$(num "$(get "sdk-$shape-$c" .cpu_us_per_op)")/$(num "$(get "raw-$shape-$c" .cpu_us_per_op)")|$(num "$(get "sdk-$shape-$c" .peak_rss_mib)")/$(num "$(get "raw-$shape-$c" .peak_rss_mib)")"
    done
  done
} | column -t -s '|'
echo
e=$(get ext-noop .throughput)
i=$(get "noop-$ext_shape-64" .throughput)
echo "no-op as a separate process ($ext_shape body, raw, 64 workers): $(num "$e") ops/s, p99 $(get ext-noop .latency_ms.p99) ms (in-process: $(num "$i") ops/s)"
for f in "$OUT"/*.json; do
  x=$(jq -r 'select(.input_exhausted == true) | "\(.shape) \(.mode) c=\(.concurrency)"' "$f")
  [ -n "$x" ] && echo "warning: input ran out in $x (throughput is a lower bound)"
done
echo "total $(($(date +%s) - started)) s"
