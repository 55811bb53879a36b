# Sourced (not run) by the .ci scripts that run an official client's live tests
# against this workspace's release broker.
#
#   broker_build                 builds `queen-mock-broker` in release (with its
#                                `mimalloc` feature); sets BROKER_BIN
#   broker_start LOG [FLAG ...]  starts it on a free loopback port with a fresh data
#                                file and the given flags, its output in LOG, and waits
#                                for GET /health; sets BROKER_URL (and BROKER_PID)
#   broker_stop                  stops it (SIGTERM, then waits) and removes its data;
#                                harmless when none runs: callers `trap broker_stop EXIT`

broker_build() {
  # With mimalloc, as benchmarked (off by default, so that tests that link the
  # library compile no C); building it here keeps the feature building.
  cargo build --release -p queen-mock-broker --features mimalloc
  BROKER_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/queen-mock-broker"
}

broker_start() {
  local log=$1
  shift
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  BROKER_DATA=$(mktemp -d)
  "$BROKER_BIN" --listen "127.0.0.1:$port" --data "$BROKER_DATA/queen.redb" \
    --log warn "$@" >"$log" 2>&1 &
  BROKER_PID=$!
  BROKER_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -sf "$BROKER_URL/health" >/dev/null && return 0
    sleep 0.1
  done
  echo "broker did not start"
  cat "$log"
  return 1
}

broker_stop() {
  if [ -n "${BROKER_PID:-}" ]; then
    kill "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
  fi
  if [ -n "${BROKER_DATA:-}" ]; then
    rm -rf "$BROKER_DATA"
    BROKER_DATA=
  fi
}
