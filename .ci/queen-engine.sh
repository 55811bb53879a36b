#!/usr/bin/env bash
# Queen 2's own broker in CI (issue 50): `queen-engine` 1.3.0, the published PostgreSQL
# broker users run their workers on, on a throwaway PostgreSQL cluster, and what this
# workspace runs against it.
#
# Usage:
#   .ci/queen-engine.sh                     the CI steps: conformance, examples, verify, shapes
#   .ci/queen-engine.sh STEP ...            some of them: conformance | write-baseline | shapes |
#                                           verify | examples | bench | features
#   .ci/queen-engine.sh run CMD [ARG ...]   start both, run CMD with QUEEN_URL set, stop
#
# Every step runs against one engine, started once: `queen-engine` is installed with
# `cargo install --locked` into $QUEEN_ENGINE_ROOT (default
# ~/.cache/queen-ci/queen-engine-1.3.0: ~7 min the first time, reused after), Debian's
# PostgreSQL is installed with apt when missing, a cluster is made with initdb in a
# temporary folder (as the `postgres` user when run as root: PostgreSQL refuses root),
# and both listen on free loopback ports. Both are stopped by pid on every exit path
# (the EXIT trap, which an error, Ctrl-C or SIGTERM reaches too), and the cluster's
# folder is removed. Logs and reports go to target/queen-engine/.
#
# Exit code: 0 when every step did what it should; 1 when a step found a difference
# (a new conformance failure, a violation, a broken worker not caught, an example
# that failed); 2 when something could not run (no PostgreSQL, the engine never
# healthy, an unknown step). Each step's own code is printed as it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

QE_VERSION=1.3.0
QE_ROOT=${QUEEN_ENGINE_ROOT:-${HOME:-/root}/.cache/queen-ci/queen-engine-$QE_VERSION}
QE_BIN="$QE_ROOT/bin/queen"
WORK="${CARGO_TARGET_DIR:-$PWD/target}/queen-engine"
BASELINE=conformance/ci/baseline-queen-engine.txt
mkdir -p "$WORK"

# Nothing here reads stdin: CI runs it with none.
exec </dev/null
export DEBIAN_FRONTEND=noninteractive

could_not_run() {
  echo "queen-engine.sh: could not run: $*" >&2
  exit 2
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# --- install ---------------------------------------------------------------------

install_engine() {
  # `cargo install` records what it installed in .crates.toml: the binary is reused
  # only when that record names this version (a half-finished install has no record).
  if [[ -x $QE_BIN ]] && grep -qF "\"queen-engine $QE_VERSION " "$QE_ROOT/.crates.toml" 2>/dev/null; then
    echo "queen-engine $QE_VERSION: reusing $QE_BIN"
    return
  fi
  echo "queen-engine $QE_VERSION: cargo install into $QE_ROOT (about 7 min on 2 cores)"
  local t0=$SECONDS
  cargo install queen-engine --version "$QE_VERSION" --locked --root "$QE_ROOT" ||
    could_not_run "cargo install queen-engine $QE_VERSION failed"
  echo "queen-engine $QE_VERSION: installed in $((SECONDS - t0)) s"
}

# The newest PostgreSQL server Debian's packages put under /usr/lib/postgresql.
pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [[ -n $d && -x $d/initdb && -x $d/postgres ]] && echo "$d"
}

install_postgres() {
  PG_BIN=$(pg_bindir || true)
  if [[ -n $PG_BIN ]]; then
    return
  fi
  if ! command -v apt-get >/dev/null || [[ $(id -u) != 0 ]]; then
    could_not_run "no PostgreSQL under /usr/lib/postgresql, and no apt-get as root to install it"
  fi
  echo "PostgreSQL: apt-get install -y postgresql"
  apt-get install -y -q postgresql >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q postgresql >/dev/null 2>&1; } ||
    could_not_run "apt-get install postgresql failed"
  PG_BIN=$(pg_bindir || true)
  [[ -n $PG_BIN ]] || could_not_run "postgresql installed, but no server under /usr/lib/postgresql"
}

# --- start and stop ------------------------------------------------------------------

PG_DIR=
PG_PID=
QE_PID=
STEP_PID=

# Runs a PostgreSQL server program as the cluster's owner: `postgres` when we are root
# (initdb and postgres refuse to run as root), else ourselves.
as_pg_owner() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Stops whatever this script started, by pid, and removes the cluster. Harmless when
# nothing runs; the EXIT trap.
stop_all() {
  local status=$?
  if [[ -n $STEP_PID ]]; then
    # A step cut short (Ctrl-C, SIGTERM): its process group, every process it started.
    kill -TERM -- "-$STEP_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 -- "-$STEP_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$STEP_PID" 2>/dev/null || true
    STEP_PID=
  fi
  if [[ -n $QE_PID ]]; then
    kill -TERM "$QE_PID" 2>/dev/null || true
    # The engine drains on SIGTERM; 15 s bounds it, then it is killed.
    for _ in $(seq 1 150); do kill -0 "$QE_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$QE_PID" 2>/dev/null || true
    wait "$QE_PID" 2>/dev/null || true
    QE_PID=
  fi
  if [[ -n $PG_PID ]]; then
    # SIGINT is PostgreSQL's fast shutdown: sessions are ended, nothing is kept.
    kill -INT "$PG_PID" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$PG_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PG_PID" 2>/dev/null || true
    PG_PID=
  fi
  if [[ -n $PG_DIR ]]; then
    rm -rf "$PG_DIR"
    PG_DIR=
  fi
  return "$status"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs "$@" in a process group of its own and waits for it: bash runs a trap only once
# its foreground command is done, while `wait` returns at once on a signal, so a
# SIGTERM sent to this script alone still reaches stop_all, which ends that group.
run_bg() {
  set -m
  "$@" &
  STEP_PID=$!
  set +m
  local rc=0
  wait "$STEP_PID" || rc=$?
  STEP_PID=
  return "$rc"
}

run_step() {
  set -euo pipefail
  "step_${1//-/_}"
}

start_postgres() {
  if [[ $(id -u) == 0 ]] && ! id postgres >/dev/null 2>&1; then
    could_not_run "running as root and there is no postgres user to run PostgreSQL as"
  fi
  PG_DIR=$(mktemp -d /tmp/queen-engine-pg.XXXXXX)
  [[ $(id -u) == 0 ]] && chown postgres: "$PG_DIR"
  PG_PORT=$(free_port)
  # Trust on loopback only: a throwaway cluster that listens nowhere else.
  as_pg_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U queen --auth=trust -E UTF8 \
    --no-sync >"$WORK/initdb.log" 2>&1 ||
    { cat "$WORK/initdb.log"; could_not_run "initdb failed"; }
  # The engine's pool defaults to 160 connections (DB_POOL_SIZE); PostgreSQL's
  # default of 100 would refuse the rest under load.
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c max_connections=300" \
    >/dev/null || { cat "$PG_DIR/postgres.log"; could_not_run "PostgreSQL did not start"; }
  PG_PID=$(head -1 "$PG_DIR/data/postmaster.pid")
  "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U queen queen ||
    could_not_run "createdb queen failed"
  echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'): 127.0.0.1:$PG_PORT (pid $PG_PID, $PG_DIR)"
}

start_engine() {
  local port mesh
  port=$(free_port)
  mesh=$(free_port)
  mkdir -p "$PG_DIR/buffers"
  # The engine is configured by environment only (src/config.rs of the crate): PG_*,
  # the HTTP PORT and bind address, the mesh port (it listens there too, so that is
  # loopback and free as well), and a file-buffer folder of its own instead of
  # /var/lib/queen/buffers. Everything else keeps its defaults (KV and timers on, no
  # auth), as users run it.
  PG_HOST=127.0.0.1 PG_PORT=$PG_PORT PG_USER=queen PG_PASSWORD=queen PG_DATABASE=queen \
    PORT=$port QUEEN_BIND_ADDR=127.0.0.1 QUEEN_MESH_PORT=$mesh \
    FILE_BUFFER_DIR="$PG_DIR/buffers" LOG_LEVEL=${QUEEN_ENGINE_LOG:-warn} \
    "$QE_BIN" >"$WORK/queen-engine.log" 2>&1 &
  QE_PID=$!
  QUEEN_ENGINE_URL="http://127.0.0.1:$port"
  # It applies its schema at boot; 60 s bounds the wait for a healthy /health.
  for _ in $(seq 1 600); do
    if curl -sf "$QUEEN_ENGINE_URL/health" 2>/dev/null | grep -q '"healthy"'; then
      echo "queen-engine $QE_VERSION: $QUEEN_ENGINE_URL (pid $QE_PID): $(curl -s "$QUEEN_ENGINE_URL/health")"
      return 0
    fi
    kill -0 "$QE_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -50 "$WORK/queen-engine.log"
  could_not_run "queen-engine did not become healthy at $QUEEN_ENGINE_URL"
}

start_all() {
  local t0=$SECONDS
  install_engine
  install_postgres
  start_postgres
  start_engine
  export QUEEN_URL=$QUEEN_ENGINE_URL
  echo "started in $((SECONDS - t0)) s"
}

# --- the steps ----------------------------------------------------------------------
# Each runs in a subshell of its own against the engine started once; its exit code
# follows the header's meaning.

# The profile of the binaries verify and examples run (release, as CI's
# verify-by-url.sh builds them; QUEEN_ENGINE_PROFILE=dev for a quicker local run).
PROFILE=${QUEEN_ENGINE_PROFILE:-release}
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

# The conformance gate: the recipe of conformance/ci (run-conformance.sh, which the
# GitHub workflow runs too) with --profile auto and the committed baseline of
# queen-engine's known failures: 0 when no other case fails, 1 naming the new ones.
# The suite's binary is a dev build: a run's time is the broker's, not the suite's.
step_conformance() {
  [[ -f $BASELINE ]] || could_not_run "no $BASELINE: write it with '.ci/queen-engine.sh write-baseline'"
  cargo build -q -p queen-conformance
  QUEEN_CONFORMANCE_BIN="$TARGET_DIR/debug/queen-conformance" \
    QUEEN_CONFORMANCE_BASELINE="$BASELINE" QUEEN_CONFORMANCE_OUT="$WORK/conformance" \
    QUEEN_CONFORMANCE_ARGS="--profile auto" bash conformance/ci/run-conformance.sh
}

# Writes the baseline again from a run against this engine (commit the file after
# reading its diff). The suite exits 1 when cases fail, which here is the point.
step_write_baseline() {
  cargo build -q -p queen-conformance
  local status=0
  "$TARGET_DIR/debug/queen-conformance" --url "$QUEEN_URL" --profile auto --wait-ready 60 \
    --write-baseline "$BASELINE" --output "$WORK/baseline-run.txt" || status=$?
  [[ $status == 0 || $status == 1 ]] || exit "$status"
  # The header names the URL it ran against, a port of this run only: name the broker.
  sed -i "1s|$QUEEN_URL|queen-engine $QE_VERSION on PostgreSQL (.ci/queen-engine.sh write-baseline)|" "$BASELINE"
  echo "$BASELINE: $(grep -vc '^#' "$BASELINE") known failure(s); the run's report: $WORK/baseline-run.txt"
}

build_examples() {
  local flag=()
  [[ $PROFILE == release ]] && flag=(--release)
  cargo build -q "${flag[@]}" -p queen-examples --bins
  BIN="$TARGET_DIR/$([[ $PROFILE == release ]] && echo release || echo debug)"
}

# The order worker proven by URL through queen-verify's fault proxy (0 violations),
# and both broken workers caught: verify-worker's own exit code.
# --allow-reset: the examples step's order-worker left its orders, receipts, reminders
# and billing group on this throwaway engine, under the names verify-worker resets;
# without it queen-verify refuses (exit 2) to delete what it did not make. Each check
# deletes what it made after its last schedule, so shapes, next, needs no such flag.
step_verify() {
  build_examples
  "$BIN/verify-worker" --url "$QUEEN_URL" --allow-reset
}

# Exactly-once for every step shape the engine has (issue 49): verify-shapes by URL,
# the answers of committed steps lost through queen-verify's fault proxy; the unsafe
# worker must be caught. Not lock-guard: the engine has no locks.
step_shapes() {
  build_examples
  "$BIN/verify-shapes" --url "$QUEEN_URL" --schedules "${QUEEN_ENGINE_SHAPES_SCHEDULES:-10}" \
    --shape ack-incr,ack-timer,ack-push-own-id,failed-ack,required-decrement,expected-version,unsafe
}

# The examples that use what the engine has, run as a user would with QUEEN_URL; the
# one that needs what it lacks is run too, and must fail naming that.
step_examples() {
  build_examples
  local failed=0

  echo "-- pipeline (ingest -> enrich -> publish; per-run names)"
  timeout 120 "$BIN/pipeline" || { echo "pipeline: FAILED"; failed=1; }
  echo "-- saga (a once_as race settled once, a handler backoff, a WorkerSet, a replay in an Epoch)"
  timeout 120 "$BIN/saga" || { echo "saga: FAILED"; failed=1; }

  echo "-- order-worker (the long-lived worker on QUEEN_URL: events pushed, then SIGTERM)"
  # Its names are fixed (orders, receipts, ...); the events' ids and the customer
  # carry this run's tag so that earlier runs' markers gate nothing here.
  local run="ci$(date +%s%N)" n=5 i
  for i in $(seq 1 $n); do
    curl -sf "$QUEEN_URL/api/v1/push" -H 'Content-Type: application/json' -d "{\"items\":[{\"queue\":\"orders\",\"partition\":\"$run-customer\",\"transactionId\":\"$run-order-$i-paid\",\"payload\":{\"orderId\":\"$run-order-$i\",\"customer\":\"$run-customer\",\"total\":$i}}]}" >/dev/null ||
      could_not_run "pushing the order-worker's events"
  done
  "$BIN/order-worker" >"$WORK/order-worker.log" 2>&1 &
  local pid=$! settled=0
  # 60 s bounds the wait for the n steps (each takes milliseconds here).
  for _ in $(seq 1 600); do
    settled=$(grep -c "^settled $run-order-.*: committed" "$WORK/order-worker.log" || true)
    [[ $settled -ge $n ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM "$pid" 2>/dev/null || true
  local rc=0
  wait "$pid" || rc=$?
  cat "$WORK/order-worker.log"
  # What it wrote, read back from the broker: one receipt per event, each order's
  # state, one reminder per order.
  local receipts state=0 reminders
  receipts=$(curl -sf "$QUEEN_URL/api/v1/messages?queue=receipts&partition=$run-customer&limit=100" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["messages"]))' || echo "?")
  for i in $(seq 1 $n); do
    curl -sf "$QUEEN_URL/api/v1/kv/orders/$run-order-$i" | grep -q '"paid"' && state=$((state + 1))
  done
  reminders=$(curl -sf "$QUEEN_URL/api/v1/timers/reminders?limit=1000" |
    python3 -c 'import json,sys; print(sum(r["timerKey"].startswith(sys.argv[1]) for r in json.load(sys.stdin)["rows"]))' "$run-order-" || echo "?")
  echo "order-worker: exit $rc, $settled of $n committed; receipts $receipts, order states $state, reminders $reminders (of $n each)"
  if [[ $rc != 0 || $settled != "$n" || $receipts != "$n" || $state != "$n" || $reminders != "$n" ]]; then
    echo "order-worker: FAILED"
    failed=1
  fi

  echo "-- locks (needs the locks API, which queen-engine 1.3 does not have)"
  local out
  rc=0
  out=$(RUST_BACKTRACE=0 timeout 120 "$BIN/locks" 2>&1) || rc=$?
  echo "$out" | head -20
  if [[ $rc == 0 ]]; then
    # A capability that appeared is news, not a failure: say so, so this is updated.
    echo "locks: RAN (exit 0): queen-engine now has what it needs; move it to the examples that run"
  # The SDK names the missing feature (Error::Unsupported): "the broker has no locks support".
  elif grep -qiE "has no locks support" <<<"$out"; then
    echo "locks: cannot run on queen-engine $QE_VERSION (as known): it has no locks route"
  else
    echo "locks: FAILED otherwise than by the missing locks route (exit $rc)"
    failed=1
  fi
  return "$failed"
}

# The throughput row of BENCHMARKS.md: the order worker's step through queen-sdk
# against the official client's (queen-mq 2.7.0) consume loop, one run
# (.ci/engine-bench). Not a CI step by default: its release build of the official
# client takes minutes, and a rate on a shared host gates nothing. The engine's KV
# quota (100 writes a second per tenant by default) refuses the step's riders as
# rate_limited within a second, which stops the run (exit 1); to measure the clients,
# start the engine with it raised (the engine reads this script's environment):
#   QUEEN_KV_WRITE_RATE=1000000 QUEEN_KV_WRITE_BURST=1000000 QUEEN_KV_CELL_RATE=0 \
#     bash .ci/queen-engine.sh bench
step_bench() {
  CARGO_TARGET_DIR="$WORK/bench-target" cargo build -q --release \
    --manifest-path .ci/engine-bench/Cargo.toml
  "$WORK/bench-target/release/engine-bench" --url "$QUEEN_URL" ${QUEEN_ENGINE_BENCH_ARGS:-}
}

# What each SDK feature does on this broker, one call each, as Markdown rows (the
# draft of the SDK README's compatibility table): it records, it does not judge.
step_features() {
  CARGO_TARGET_DIR="$WORK/bench-target" cargo build -q --release \
    --manifest-path .ci/engine-bench/Cargo.toml
  "$WORK/bench-target/release/sdk-features" "$QUEEN_URL" | tee "$WORK/sdk-features.md"
}

# --- dispatch ------------------------------------------------------------------------

if [[ ${1:-} == run ]]; then
  shift
  [[ $# -gt 0 ]] || could_not_run "run needs a command"
  start_all
  status=0
  run_bg "$@" || status=$?
  exit "$status"
fi

STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(conformance examples verify shapes)
for step in "${STEPS[@]}"; do
  case $step in
    conformance | write-baseline | verify | shapes | examples | bench | features) ;;
    *) could_not_run "unknown step $step (conformance, write-baseline, verify, shapes, examples, bench, features, or run CMD)" ;;
  esac
done

start_all
worst=0
summary=()
for step in "${STEPS[@]}"; do
  echo "== queen-engine: $step"
  t0=$SECONDS
  # Not in an `||` list: there bash would ignore the step's `set -e`.
  set +e
  run_bg run_step "$step"
  rc=$?
  set -e
  summary+=("$step: exit $rc in $((SECONDS - t0)) s")
  echo "== queen-engine: $step: exit $rc in $((SECONDS - t0)) s"
  if [[ $rc -ge 2 ]]; then
    worst=2
  elif [[ $rc == 1 && $worst == 0 ]]; then
    worst=1
  fi
  if ! kill -0 "$QE_PID" 2>/dev/null; then
    tail -50 "$WORK/queen-engine.log"
    could_not_run "queen-engine exited during step $step"
  fi
done
echo "== queen-engine $QE_VERSION: ${summary[*]/%/;}"
exit "$worst"
