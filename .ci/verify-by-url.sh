#!/usr/bin/env bash
# Proves the order worker against the release broker by URL, as the README's CI recipe
# does for a user's worker: `queen-mock-broker` started on a free port with a fresh
# data file (the helpers of .ci/broker.sh), then `verify-worker --url` runs the order
# worker under fault schedules through its in-process fault proxy (0 violations wanted)
# and must catch both broken workers. Exit codes are verify-worker's: 0 as expected,
# 1 not, 2 could not run.
#
# Usage: .ci/verify-by-url.sh [VERIFY-WORKER FLAG ...]   (e.g. --schedules 40)
set -euo pipefail
cd "$(dirname "$0")/.."

. .ci/broker.sh
broker_build
cargo build --release -p queen-examples --bin verify-worker --bin verify-shapes
trap broker_stop EXIT
broker_start "${CARGO_TARGET_DIR:-$PWD/target}/verify-by-url-broker.log"
"${CARGO_TARGET_DIR:-$PWD/target}/release/verify-worker" --url "$BROKER_URL" "$@"
"${CARGO_TARGET_DIR:-$PWD/target}/release/verify-shapes" --url "$BROKER_URL" --schedules 10
