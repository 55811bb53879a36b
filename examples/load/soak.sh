#!/usr/bin/env bash
# The soak (issue 43, point 3): the standalone release broker on a fresh data file, and
# `load --soak` against it for MINUTES at a fixed rate of mixed pushes, pops with acks,
# transactions (ack + push + KV put), KV reads and writes and timers, on queues with
# completed retention. Every SAMPLE_SECS it samples the broker's RSS, data file + log
# size, open files, the messages stored, p50/p99 and errors into OUT_DIR/soak.csv and
# redraws OUT_DIR/soak.svg; at the end it pops whatever is left, checks that every
# acknowledged push was consumed, and writes OUT_DIR/summary.txt (printed) and
# summary.json. It exits non-zero if a call failed or a message was lost.
#
#   bash examples/load/soak.sh 60 soak-60          # an hour, into ./soak-60
#   bash examples/load/soak.sh 3                   # 3 minutes, into ./soak-<time>
#   RATE=500 RETENTION=600 bash examples/load/soak.sh 20 /tmp/soak
#
# RATE (300) operations a second; RETENTION (300) the queues' completedRetentionSeconds,
# so stored data stops growing after about RETENTION + one sample; SAMPLE_SECS (60);
# CONCURRENCY (256) most operations in flight: at 300 a second a stall of the broker
# fills 64 in about 0.2 s, after which operations are skipped (counted, but their
# latency is then missing from the p99), so the soak absorbs stalls of most of a
# second; TIMER_DELAY (5) seconds; PORT (6760). A relative OUT_DIR is taken from the
# folder the script is started in.
set -euo pipefail

MINUTES=${1:?usage: soak.sh MINUTES [OUT_DIR]}
OUT_DIR=${2:-soak-$(date -u +%Y%m%dT%H%MZ)}
case $OUT_DIR in /*) ;; *) OUT_DIR=$PWD/$OUT_DIR ;; esac
cd "$(dirname "$0")/../.."
RATE=${RATE:-300}
RETENTION=${RETENTION:-300}
SAMPLE_SECS=${SAMPLE_SECS:-60}
CONCURRENCY=${CONCURRENCY:-256}
TIMER_DELAY=${TIMER_DELAY:-5}
PORT=${PORT:-6760}

TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet -p queen-load --bin load
# The broker as BENCHMARKS.md measures the standalone one: with mimalloc (a feature off
# by default).
cargo build --release --quiet -p queen-mock-broker --features mimalloc
BIN=$TARGET/release/load
BROKER=$TARGET/release/queen-mock-broker

mkdir -p "$OUT_DIR"
DATA=$(mktemp -d)
"$BROKER" --listen "127.0.0.1:$PORT" --data "$DATA/queen.redb" >"$DATA/broker.log" 2>&1 &
BROKER_PID=$!
stop_broker() {
  if kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID"
    wait "$BROKER_PID" 2>/dev/null || true
  fi
}
trap 'stop_broker; cp "$DATA/broker.log" "$OUT_DIR/broker.log" 2>/dev/null || true; rm -rf "$DATA"' EXIT
ready=
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && { ready=1; break; }
  sleep 0.1
done
[ -n "$ready" ] || { echo "the broker did not answer on port $PORT:" >&2; cat "$DATA/broker.log" >&2; exit 1; }

{
  echo "started: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo -)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "host: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "broker: $BROKER (pid $BROKER_PID) --listen 127.0.0.1:$PORT --data $DATA/queen.redb"
  echo "soak: $MINUTES min, RATE=$RATE RETENTION=$RETENTION SAMPLE_SECS=$SAMPLE_SECS CONCURRENCY=$CONCURRENCY TIMER_DELAY=$TIMER_DELAY"
} >"$OUT_DIR/run.txt"

status=0
"$BIN" --soak "$MINUTES" --url "http://127.0.0.1:$PORT" \
  --broker-pid "$BROKER_PID" --data "$DATA/queen.redb" \
  --rate "$RATE" --retention-secs "$RETENTION" --sample-secs "$SAMPLE_SECS" \
  --concurrency "$CONCURRENCY" --timer-delay-secs "$TIMER_DELAY" \
  --out "$OUT_DIR" 2> >(tee "$OUT_DIR/soak.log" >&2) >/dev/null || status=$?
echo "ended: $(date -u +%Y-%m-%dT%H:%M:%SZ), exit $status" >>"$OUT_DIR/run.txt"

echo
cat "$OUT_DIR/summary.txt" 2>/dev/null || echo "no summary (the soak failed before it; see $OUT_DIR/soak.log)"
echo "files: $OUT_DIR/soak.csv $OUT_DIR/soak.svg $OUT_DIR/summary.txt $OUT_DIR/summary.json $OUT_DIR/run.txt $OUT_DIR/broker.log"
exit "$status"
