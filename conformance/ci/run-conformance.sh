#!/usr/bin/env bash
# The conformance suite as a CI step: start a broker (the reference broker of this
# workspace, unless QUEEN_URL names one that is already running), make sure the broker
# answering is that one, run the suite against it with the known failures of a baseline
# (when there is one) and leave the reports in $QUEEN_CONFORMANCE_OUT.
# .github/workflows (see conformance/ci/github-workflow.yml) runs these same steps.
#
# Exit code: the suite's (0 conformant or matching the baseline, 1 differences,
# 2 could not run); 2 as well, with one line saying why, when this script cannot start
# its broker, or the port answers for another process, or a named file is missing.
#
# Environment (all optional):
#   QUEEN_URL                   a broker already running; none is started
#   QUEEN_PORT                  the port of the started broker (default: a free one,
#                               chosen by the kernel: the broker listens on port 0 and
#                               the script reads the address it prints)
#   QUEEN_DATA                  run the started broker on this data file (--data)
#                               instead of in memory
#   QUEEN_BROKER_BIN            the broker binary (default: cargo build --release -p queen-mock-broker)
#   QUEEN_CONFORMANCE_BIN       the suite's binary (default: cargo build --release -p queen-conformance)
#   CARGO_TARGET_DIR            where cargo puts those builds (cargo's own setting; the
#                               script asks cargo for the directory, so
#                               build.target-dir in .cargo/config.toml counts too)
#   QUEEN_CONFORMANCE_BASELINE  the known failures (default conformance/ci/baseline.txt,
#                               used when it exists; a file named here must exist)
#   QUEEN_CONFORMANCE_WRITE_BASELINE  also write the run's failures to this file
#   QUEEN_CONFORMANCE_OUT       where the reports go (conformance-report): summary.txt
#                               (the suite's standard output: the text report and the
#                               gate's lines), junit.xml, summary.md (Markdown, for a
#                               pull-request comment) and broker.log
#   QUEEN_CONFORMANCE_ARGS      more arguments for the suite (e.g. --only core.*)
set -euo pipefail

fail() {
  echo "run-conformance.sh: could not run: $*" >&2
  exit 2
}

out="${QUEEN_CONFORMANCE_OUT:-conformance-report}"
mkdir -p "$out"

baseline_args=()
if [ -n "${QUEEN_CONFORMANCE_BASELINE:-}" ]; then
  # Named on purpose: a missing file is a broken setup, not "no known failures".
  [ -f "$QUEEN_CONFORMANCE_BASELINE" ] ||
    fail "the baseline $QUEEN_CONFORMANCE_BASELINE does not exist (QUEEN_CONFORMANCE_BASELINE)"
  baseline_args=(--baseline "$QUEEN_CONFORMANCE_BASELINE")
elif [ -f conformance/ci/baseline.txt ]; then
  baseline_args=(--baseline conformance/ci/baseline.txt)
fi
if [ -n "${QUEEN_CONFORMANCE_WRITE_BASELINE:-}" ]; then
  baseline_args+=(--write-baseline "$QUEEN_CONFORMANCE_WRITE_BASELINE")
fi

# Cargo's target directory, as cargo itself resolves it (CARGO_TARGET_DIR, a config
# file, or the workspace's target/).
target_dir() {
  if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    echo "$CARGO_TARGET_DIR"
    return
  fi
  local dir
  dir=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  echo "${dir:-target}"
}

suite="${QUEEN_CONFORMANCE_BIN:-}"
if [ -z "$suite" ]; then
  cargo build --release --locked -p queen-conformance
  suite="$(target_dir)/release/queen-conformance"
fi
[ -x "$suite" ] || fail "the suite's binary $suite is not there (QUEEN_CONFORMANCE_BIN, CARGO_TARGET_DIR)"

# Whether process $1 holds the listening socket of port $2 (Linux: /proc). Answers 2
# when that cannot be told here (no /proc).
owns_port() {
  local pid=$1 port=$2 hex inode
  [ -r /proc/net/tcp ] || return 2
  hex=$(printf '%04X' "$port")
  inode=$(awk -v p=":$hex" '$2 ~ (p "$") && $4 == "0A" { print $10; exit }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null || true)
  [ -n "$inode" ] || return 1
  find "/proc/$pid/fd" -maxdepth 1 -lname "socket:\[$inode\]" 2>/dev/null | grep -q .
}

url="${QUEEN_URL:-}"
broker_pid=""
if [ -z "$url" ]; then
  broker="${QUEEN_BROKER_BIN:-}"
  if [ -z "$broker" ]; then
    cargo build --release --locked -p queen-mock-broker
    broker="$(target_dir)/release/queen-mock-broker"
  fi
  [ -x "$broker" ] || fail "the broker's binary $broker is not there (QUEEN_BROKER_BIN, CARGO_TARGET_DIR)"
  storage=(--in-memory)
  if [ -n "${QUEEN_DATA:-}" ]; then
    storage=(--data "$QUEEN_DATA")
  fi
  # The log exists before the broker starts: the redirection below happens in the
  # child, and the loop reading the log may run before the child has made it.
  : >"$out/broker.log"
  "$broker" "${storage[@]}" --listen "127.0.0.1:${QUEEN_PORT:-0}" >"$out/broker.log" 2>&1 &
  broker_pid=$!
  trap 'kill "$broker_pid" 2>/dev/null || true' EXIT
  # The broker prints the address it listens on; until then it may still be opening
  # its data file. One that exits first (the port is taken, the file is damaged) is
  # named with the last line of its log, never gated in place of another broker.
  for _ in $(seq 1 600); do
    url=$(sed -n 's/^queen-mock-broker listening on \(http:\/\/[^ ]*\).*/\1/p' "$out/broker.log" | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$broker_pid" 2>/dev/null ||
      fail "the broker exited at start: $(tail -n 1 "$out/broker.log")"
    sleep 0.1
  done
  [ -n "$url" ] || fail "the broker printed no address within 60 s (see $out/broker.log)"
  port="${url##*:}"
  status=0
  owns_port "$broker_pid" "$port" || status=$?
  case "$status" in
    0) ;;
    2) echo "run-conformance.sh: no /proc here: the port's owner is not checked (the broker printed $url)" ;;
    *) fail "port $port does not answer for the broker this script started (pid $broker_pid)" ;;
  esac
fi

# Split the extra arguments on spaces, without expanding `*` in patterns.
set -f
# shellcheck disable=SC2206 # word splitting of the extra arguments is intended
extra=(${QUEEN_CONFORMANCE_ARGS:-})
set +f

args=(--url "$url" --wait-ready 60
  --format text --format "junit=$out/junit.xml" --format "markdown=$out/summary.md")
status=0
"$suite" "${args[@]}" ${baseline_args[@]+"${baseline_args[@]}"} ${extra[@]+"${extra[@]}"} |
  tee "$out/summary.txt" || status=${PIPESTATUS[0]}
# A broker that died during the run leaves its port to whoever takes it next: say so.
if [ -n "$broker_pid" ] && ! kill -0 "$broker_pid" 2>/dev/null; then
  echo "run-conformance.sh: the broker this script started exited during the run: $(tail -n 1 "$out/broker.log")" >&2
  [ "$status" -eq 0 ] && status=2
fi
echo "queen-conformance exited $status (0 conformant or matching the baseline, 1 differences, 2 could not run)"
exit "$status"
