#!/usr/bin/env bash
# Two builds of the load generator (and so of the embedded broker) against each other
# and against the no-op, read so that this host's drift does not decide it: ROUNDS
# rounds, each of build A, build B and the no-op back to back in an order that rotates
# from round to round, one shape, raw HTTP. Each ratio is taken inside one round; the
# table gives the median over rounds and the range. This is how a change to the broker
# is measured before it is kept, and how a bound is taken (a build with some of the
# broker's work cut out, unusable, a measurement only: benchmarks-history.md here,
# thirteenth round).
#
#   cp target/release/load /tmp/load-before        # build A
#   # ...change the broker, then:
#   cargo build --release -p queen-load --bin load && cp target/release/load /tmp/load-after
#   bash examples/load/compare-builds.sh /tmp/load-before /tmp/load-after
#   ROUNDS=12 SHAPE=ack-push bash examples/load/compare-builds.sh A B
#
# The no-op runs from build A. KEEP=1 keeps the runs' JSON reports (their folder is
# printed). Needs jq.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $(basename "$0") LOAD_A LOAD_B" >&2; exit 2; }
A=$(realpath "$1")
B=$(realpath "$2")
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-8}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
WORKERS=${WORKERS:-64}
SHAPE=${SHAPE:-push-kv}
PARTITIONS=$((WORKERS > 64 ? WORKERS : 64))

. examples/load/common.sh
trap '[ -n "${KEEP:-}" ] && echo "reports in $OUT" >&2 || rm -rf "$OUT"' EXIT

common=(--mode raw --shape "$SHAPE" -c "$WORKERS" --partitions "$PARTITIONS")
echo "running $ROUNDS rounds of A, B and the no-op, each run ${DURATION}s after ${WARMUP}s warm-up:" >&2
for round in $(seq "$ROUNDS"); do
  # Rotate the order, so that no build is always the first of its round.
  for i in 0 1 2; do
    case $(( (round + i) % 3 )) in
      0) BIN=$A run "a-$round" "${common[@]}" ;;
      1) BIN=$B run "b-$round" "${common[@]}" ;;
      2) BIN=$A run "n-$round" "${common[@]}" --against-noop ;;
    esac
  done
done

ba=$(mktemp) an=$(mktemp) bn=$(mktemp) ca=$(mktemp) cb=$(mktemp) wa=$(mktemp) wb=$(mktemp)
for round in $(seq "$ROUNDS"); do
  a=$(get "a-$round" .throughput) b=$(get "b-$round" .throughput) n=$(get "n-$round" .throughput)
  [ -n "$a" ] && [ -n "$b" ] && echo "$(ratio "$b" "$a")" >>"$ba"
  [ -n "$a" ] && [ -n "$n" ] && echo "$(ratio "$a" "$n")" >>"$an"
  [ -n "$b" ] && [ -n "$n" ] && echo "$(ratio "$b" "$n")" >>"$bn"
  get "a-$round" .cpu_us_per_op >>"$ca"
  get "b-$round" .cpu_us_per_op >>"$cb"
  get "a-$round" .writer_cpu_us_per_op >>"$wa"
  get "b-$round" .writer_cpu_us_per_op >>"$wb"
done
echo
echo "queen compare-builds, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $SHAPE raw, $WORKERS workers, $ROUNDS rounds of ${DURATION}s runs"
echo "A = $A"
echo "B = $B"
echo "B / A       $(summary "$ba")"
echo "A / noop    $(summary "$an")"
echo "B / noop    $(summary "$bn")"
echo "CPU us/op   A $(num "$(median <"$ca")"), B $(num "$(median <"$cb")") (medians)"
echo "writer us/op A $(num "$(median <"$wa")"), B $(num "$(median <"$wb")") (medians; the serial stage)"
rm -f "$ba" "$an" "$bn" "$ca" "$cb" "$wa" "$wb"
