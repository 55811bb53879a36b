#!/usr/bin/env bash
# The README's "Build weight": what a user waits for the first time they build. Three
# new crates outside the workspace, each built cold (an empty target directory; debug,
# as a test build is), one after another in one run:
#
#   official  depends on the official Queen 2 client, queen-mq = "=2.7.0"  cargo build
#   sdk       depends on queen-sdk (default features)                       cargo build
#   harness   queen-sdk, and queen-mock-broker as a dev-dependency          cargo test --no-run
#
# Each line gives the wall time, the CPU time (user + system of the whole build: less
# moved by other work on the machine than the wall time) and the crates compiled (cargo's
# `Compiling` lines), then the two ratios to queen-mq that the README's goals are set on.
#
#   bash examples/load/build-weight.sh              # this workspace
#   bash examples/load/build-weight.sh /path/to/ws  # another checkout (a commit before)
#
# Downloads happen before the clock starts (cargo fetch). Needs /usr/bin/time and bc;
# the crates go in a temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
WS=$(cd "${1:-.}" && pwd)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
unset CARGO_TARGET_DIR

crate() { # crate NAME DEPENDENCIES DEV-DEPENDENCIES
  mkdir -p "$DIR/$1/src" "$DIR/$1/tests"
  printf '[package]\nname = "bw-%s"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n[dependencies]\n%s\n[dev-dependencies]\n%s\n[workspace]\n' \
    "$1" "$2" "$3" >"$DIR/$1/Cargo.toml"
}
crate official 'queen-mq = "=2.7.0"' ''
echo 'pub use queen_mq;' >"$DIR/official/src/lib.rs"
crate sdk "queen-sdk = { path = \"$WS/sdk\" }" ''
echo 'pub fn client(url: &str) -> queen_sdk::Client { queen_sdk::Client::new(url).unwrap() }' \
  >"$DIR/sdk/src/lib.rs"
crate harness "queen-sdk = { path = \"$WS/sdk\" }" \
  "queen-mock-broker = { path = \"$WS/mock-broker\" }
tokio = { version = \"1\", features = [\"macros\", \"rt\"] }"
cp "$DIR/sdk/src/lib.rs" "$DIR/harness/src/lib.rs"
cat >"$DIR/harness/tests/it.rs" <<'RS'
#[tokio::test]
async fn starts() {
    let broker = queen_mock_broker::MockBroker::start_in_memory().await.unwrap();
    let _ = bw_harness::client(&broker.url());
    broker.shutdown().await;
}
RS

for c in official sdk harness; do (cd "$DIR/$c" && cargo fetch -q); done
declare -A WALL CPU
for c in official sdk harness; do
  cmd=(cargo build)
  [[ $c == harness ]] && cmd=(cargo test --no-run)
  load=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  (cd "$DIR/$c" && /usr/bin/time -f '%U %S' -o cpu.txt "${cmd[@]}" >build.log 2>&1) ||
    { cat "$DIR/$c/build.log"; exit 1; }
  WALL[$c]=$(echo "$(date +%s.%N) - $start" | bc)
  CPU[$c]=$(awk '{print $1 + $2}' "$DIR/$c/cpu.txt")
  n=$(grep -c '^ *Compiling ' "$DIR/$c/build.log")
  printf '%-8s %6.1f s wall  %6.1f s CPU  %3d crates  (load %s before)  %s\n' \
    "$c" "${WALL[$c]}" "${CPU[$c]}" "$n" "$load" "${cmd[*]}"
  rm -rf "$DIR/$c/target"
done
for c in sdk harness; do
  printf '%s / official: %.2f wall, %.2f CPU\n' "$c" \
    "$(echo "${WALL[$c]} / ${WALL[official]}" | bc -l)" "$(echo "${CPU[$c]} / ${CPU[official]}" | bc -l)"
done
