#!/usr/bin/env bash
# The conformance suite as a CI step: start a broker (the reference broker of this
# workspace, unless QUEEN_URL names one that is already running), wait for it, run the
# suite against it with the known failures of conformance/ci/baseline.txt (when that
# file exists) and a JUnit report, and leave the report in $QUEEN_CONFORMANCE_OUT.
# .github/workflows (see conformance/ci/github-workflow.yml) runs these same steps.
#
# Exit code: the suite's (0 conformant or matching the baseline, 1 differences,
# 2 could not run).
#
# Environment (all optional):
#   QUEEN_URL                   a broker already running; none is started
#   QUEEN_PORT                  the port of the started broker (6632)
#   QUEEN_BROKER_BIN            the broker binary (default: cargo build --release -p queen-mock-broker)
#   QUEEN_CONFORMANCE_BIN       the suite's binary (default: cargo build --release -p queen-conformance)
#   QUEEN_CONFORMANCE_BASELINE  the known failures (conformance/ci/baseline.txt)
#   QUEEN_CONFORMANCE_OUT       where the reports go (conformance-report)
#   QUEEN_CONFORMANCE_ARGS      more arguments for the suite (e.g. --only core.*)
set -euo pipefail

out="${QUEEN_CONFORMANCE_OUT:-conformance-report}"
baseline="${QUEEN_CONFORMANCE_BASELINE:-conformance/ci/baseline.txt}"
mkdir -p "$out"

suite="${QUEEN_CONFORMANCE_BIN:-}"
if [ -z "$suite" ]; then
  cargo build --release --locked -p queen-conformance
  suite="target/release/queen-conformance"
fi

url="${QUEEN_URL:-}"
if [ -z "$url" ]; then
  broker="${QUEEN_BROKER_BIN:-}"
  if [ -z "$broker" ]; then
    cargo build --release --locked -p queen-mock-broker
    broker="target/release/queen-mock-broker"
  fi
  port="${QUEEN_PORT:-6632}"
  "$broker" --in-memory --listen "127.0.0.1:$port" >"$out/broker.log" 2>&1 &
  broker_pid=$!
  trap 'kill "$broker_pid" 2>/dev/null || true' EXIT
  url="http://127.0.0.1:$port"
fi

args=(--url "$url" --wait-ready 60 --format junit --output "$out/junit.xml")
if [ -f "$baseline" ]; then
  args+=(--baseline "$baseline")
fi
# Split the extra arguments on spaces, without expanding `*` in patterns.
set -f
# shellcheck disable=SC2206 # word splitting of the extra arguments is intended
extra=(${QUEEN_CONFORMANCE_ARGS:-})
set +f

status=0
"$suite" "${args[@]}" "${extra[@]}" | tee "$out/summary.txt" || status=${PIPESTATUS[0]}
echo "queen-conformance exited $status (0 conformant or matching the baseline, 1 differences, 2 could not run)"
exit "$status"
