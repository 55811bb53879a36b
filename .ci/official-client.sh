#!/usr/bin/env bash
# Runs the live tests of the official Queen 2 Rust client (`queen-mq` 2.7.0, the
# authority on Queen 2 behaviour outside transaction.md; see wire.md) against the
# release broker of this workspace, so the files that pass keep passing.
#
# Usage: .ci/official-client.sh [TEST_FILE ...]   (default: every file of live tests)
#
# One live test is skipped, on purpose: coverage's
# `dead_lettering_needs_both_flags_off_to_be_off` pins Queen 2's
# `deadLetterQueue OR dlqAfterMaxRetries`, while transaction.md (which wins on
# transaction semantics, see wire.md) says a message is dropped with
# `deadLetterQueue: false`; our conformance suite holds the broker to transaction.md.
#
# It fetches the published crate through cargo (crates.io), copies it out of the
# registry, starts `queen-mock-broker` on a free port with a fresh data file (the
# helpers of .ci/broker.sh), and runs `cargo test --test FILE ...` in the copy with
# QUEEN_TEST_URL and QUEEN_TEST_STRICT=1.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(core semantics locks kv_timers admin coverage reads streams)
fi

WORK="$PWD/target/official-client"
mkdir -p "$WORK/scratch/src"
cat > "$WORK/scratch/Cargo.toml" <<'TOML'
[package]
name = "official-client-scratch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
queen-mq = "=2.7.0"

[workspace]
TOML
echo 'fn main() {}' > "$WORK/scratch/src/main.rs"
cargo fetch --manifest-path "$WORK/scratch/Cargo.toml" >/dev/null
SRC=$(cargo metadata --format-version 1 --manifest-path "$WORK/scratch/Cargo.toml" |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print([p["manifest_path"] for p in m["packages"] if p["name"]=="queen-mq"][0])')
rm -rf "$WORK/queen-mq"
cp -r "$(dirname "$SRC")" "$WORK/queen-mq"
# The copy sits under this workspace's target/: a workspace table of its own keeps
# cargo from taking it for a member of ours.
printf '\n[workspace]\n' >> "$WORK/queen-mq/Cargo.toml"

. .ci/broker.sh
broker_build
trap broker_stop EXIT
broker_start "$WORK/broker.log"

ARGS=()
for f in "${FILES[@]}"; do ARGS+=(--test "$f"); done
cd "$WORK/queen-mq"
QUEEN_TEST_URL="$BROKER_URL" QUEEN_TEST_STRICT=1 \
  CARGO_TARGET_DIR="$WORK/target" CARGO_PROFILE_DEV_DEBUG=false cargo test "${ARGS[@]}" --no-fail-fast -- \
  --skip dead_lettering_needs_both_flags_off_to_be_off
