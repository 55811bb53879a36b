#!/usr/bin/env bash
# What an open console costs the broker under load: ROUNDS rounds of the same run of
# `load` against the release broker (`--url`), once with no console open and once with
# one page of it open, in an order that alternates from round to round; each ratio is
# taken inside one round, the table gives the median and range. "Open" is what that page
# asks every 2 s while it is visible (VIEW: `queues`, the page it opens on, by default;
# `queue`, one queue's page, whose full detail, a scan of the queue, is read once when it
# opens and is not counted here; `transactions`, the in-memory log; `dlq`), with the
# tenant's data growing all along under the load. A browser is not
# started: on a developer's machine it is not on the broker's cores, and here it would be.
#
#   bash examples/load/console-cost.sh                 # 6 rounds of ack-push, 5 s each
#   VIEW=queue ROUNDS=10 SHAPE=seed-step bash examples/load/console-cost.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
WORKERS=${WORKERS:-64}
SHAPE=${SHAPE:-ack-push}
VIEW=${VIEW:-queues}
. examples/load/common.sh
. .ci/broker.sh
broker_build
trap 'broker_stop; rm -rf "$OUT"' EXIT
broker_start "$OUT/broker.log"

# The reads of each page, as app.js makes them (`queue`: the queue that holds most, the
# load's input, looked up by a status read each time).
case $VIEW in
  queues) PATHS=('/api/v1/status/queues?limit=1000') ;;
  queue) PATHS=('/api/v1/resources/partitions?queue=QUEUE&limit=1000' /api/v1/consumer-groups) ;;
  transactions) PATHS=('/api/v1/transactions?limit=50') ;;
  dlq) PATHS=('/api/v1/dlq?limit=100') ;;
  *) echo "VIEW is queues, queue, transactions or dlq" >&2; exit 2 ;;
esac

console() { # polls one page's reads every 2 s until killed
  while true; do
    local biggest=
    if [[ $VIEW == queue ]]; then
      biggest=$(curl -sf "$BROKER_URL/api/v1/status/queues?limit=1000" | jq -r '[.queues[]] | max_by(.messages.total) | .name // ""')
    fi
    for path in "${PATHS[@]}"; do
      curl -sf -o /dev/null "$BROKER_URL${path/QUEUE/$biggest}" &
    done
    wait
    sleep 2
  done
}

echo "$ROUNDS rounds of $SHAPE at $WORKERS workers, ${DURATION}s each, without and with the console's $VIEW page open:" >&2
: >"$OUT/ratios"
for round in $(seq "$ROUNDS"); do
  for i in 0 1; do
    if (( (round + i) % 2 )); then
      console & poller=$!
      run "open-$round" --url "$BROKER_URL" --mode raw --shape "$SHAPE" -c "$WORKERS"
      kill "$poller"; wait "$poller" 2>/dev/null || true
    else
      run "closed-$round" --url "$BROKER_URL" --mode raw --shape "$SHAPE" -c "$WORKERS"
    fi
  done
  o=$(get "open-$round" .throughput) c=$(get "closed-$round" .throughput)
  printf 'round %s: closed %s ops/s, open %s ops/s, open/closed %s\n' "$round" "$(num "$c")" "$(num "$o")" "$(ratio "$o" "$c")"
  ratio "$o" "$c" | grep -v -- - >>"$OUT/ratios" || true
done
echo "$VIEW page open / closed throughput: $(summary "$OUT/ratios")"
