#!/usr/bin/env bash
# What the SDK's step marker costs a step (issue 49): the load generator's `ack-incr`
# (pop one message, then ack + KV incr, which nothing else guards against a resend, so
# the SDK adds its marker), against the same step with `--no-step-marker` (sent as it
# is, `retry_unsafe`), through the SDK against the embedded durable broker, in
# alternating rounds. Prints each round and the medians of throughput and CPU per op,
# and their ratios (with marker / without).
#
#   bash examples/load/step-marker-cost.sh [ROUNDS] [SECONDS] [WORKERS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-6} secs=${2:-5} workers=${3:-64}
cargo build --release -q -p queen-load
load=${CARGO_TARGET_DIR:-target}/release/load
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  # Alternate which runs first, so a drift in the machine's load hits both alike.
  if (( r % 2 )); then order="marker bare"; else order="bare marker"; fi
  for v in $order; do
    flag=(); [[ $v == bare ]] && flag=(--no-step-marker)
    "$load" --shape ack-incr -c "$workers" -d "$secs" --json "${flag[@]}" 2>/dev/null >"$out/$v-$r.json"
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {v: [json.load(open(f"{out}/{v}-{r}.json")) for r in range(1, rounds + 1)] for v in ("marker", "bare")}
for r in range(rounds):
    m, b = rows["marker"][r], rows["bare"][r]
    print(f"round {r+1}: marker {m['throughput']:.0f}/s {m['cpu_us_per_op']:.1f} us/op, "
          f"bare {b['throughput']:.0f}/s {b['cpu_us_per_op']:.1f} us/op, errors {m['errors']}+{b['errors']}")
med = lambda v, k: statistics.median(x[k] for x in rows[v])
for k, name in (("throughput", "throughput"), ("cpu_us_per_op", "CPU per op"), ("writer_cpu_us_per_op", "writer CPU per op")):
    m, b = med("marker", k), med("bare", k)
    print(f"median {name}: with marker {m:.1f}, without {b:.1f}, ratio {m / b:.3f}")
PY
