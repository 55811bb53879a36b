#!/usr/bin/env bash
# Schedules per second of `verify-worker` (the order worker under N seeded fault
# schedules, each on a fresh in-process durable broker, then both broken workers
# caught), at a commit before and at this checkout, run one after the other in one run
# (the machine is shared: a ratio measured in one run is the figure, not either time).
#
#   bash examples/load/verify-speed.sh            # against 4cb6681, 500 schedules
#   bash examples/load/verify-speed.sh REV N      # another commit, another count
#
# Builds both in release (the commit before in a git worktree under /tmp, its own target
# directory kept in $BASE_TARGET, default /tmp/verify-speed-target, for a rerun).
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${1:-4cb6681}
N=${2:-500}
TREE=/tmp/verify-speed-$BASE
BASE_TARGET=${BASE_TARGET:-/tmp/verify-speed-target}
[ -d "$TREE" ] || git worktree add -f "$TREE" "$BASE" >/dev/null
(cd "$TREE" && CARGO_TARGET_DIR=$BASE_TARGET cargo build -q --release -p queen-examples --bin verify-worker)
cargo build -q --release -p queen-examples --bin verify-worker
HERE=${CARGO_TARGET_DIR:-target}/release/verify-worker

run() { # run LABEL BINARY DIR: prints LABEL, the wall seconds and the report's result line
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$(cd "$3" && QUEEN_VERIFY_SCHEDULES=$N "$2" 2>&1 || true)
  t1=$(date +%s.%N)
  printf '%s\t%.1f s\t%s\n' "$1" "$(echo "$t1 - $t0" | bc)" "$(echo "$out" | grep -E '^order worker|^result' | tr '\n' ' ')"
  echo "$t1 - $t0" | bc
}
base=$(run "$BASE" "$BASE_TARGET/release/verify-worker" "$TREE" | tee /dev/stderr | tail -1)
head=$(run "$(git rev-parse --short HEAD)" "$PWD/$HERE" "$PWD" | tee /dev/stderr | tail -1)
printf 'whole program (%s schedules of the order worker, then both broken workers): %s %.1f s, HEAD %.1f s: %.1fx faster\n' \
  "$N" "$BASE" "$base" "$head" "$(echo "$base / $head" | bc -l)"
