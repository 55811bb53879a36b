#!/usr/bin/env bash
# Runs the cargo-fuzz targets of mock-broker/fuzz, each for its share of a time budget,
# and prints the executions of each and every finding (a crash, a panic, a timeout, an
# out-of-memory, or a finding of the router targets' judge). Exits 1 on a finding.
#
#   mock-broker/fuzz/run.sh MINUTES [TARGET ...]     # e.g. run.sh 10, run.sh 0.5 router
#
# MINUTES is the whole budget (a fraction is fine), split evenly between the targets
# (all six by default); the build comes on top. Each run starts from fuzz/corpus/TARGET
# (kept between runs, ignored by git) and the committed seeds fuzz/seeds/TARGET, with
# the dictionary fuzz/queen.dict; crashes go to fuzz/artifacts/TARGET.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain (or, on stable
# only, RUSTC_BOOTSTRAP=1 in the environment). Without them the script says why and
# exits 0: the stable tests/parsers.rs runs the same decoders and judge in every
# `cargo test`. QUEEN_FUZZ_REQUIRED=1 makes a missing tool exit 2 instead.
#
# Knobs: QUEEN_FUZZ_TIMEOUT (seconds one input may take before it is a hang, default
# 20), QUEEN_FUZZ_CODEGEN_UNITS (default 1, cargo-fuzz's; 16 builds faster and runs
# slower), QUEEN_FUZZ_RSS_MB (libFuzzer's memory limit, default 3072).
set -euo pipefail

usage() {
    echo "usage: $0 MINUTES [TARGET ...]" >&2
    exit 64
}
[[ $# -ge 1 ]] || usage
minutes=$1
shift
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || usage

fuzz_dir="$(cd "$(dirname "$0")" && pwd)"
cd "$fuzz_dir/.." # cargo fuzz runs from the crate that holds fuzz/

all=(push_body transaction_body route_body route_query route_path router)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ -f "fuzz/fuzz_targets/$t.rs" ]] || { echo "no fuzz target $t (have: ${all[*]})" >&2; exit 64; }
done

skip() {
    echo "fuzz: skipped: $1"
    if [[ ${QUEEN_FUZZ_REQUIRED:-0} == 1 ]]; then
        exit 2
    fi
    echo "fuzz: (the stable property test tests/parsers.rs covers the same parsers in cargo test)"
    exit 0
}

if ! cargo fuzz --version >/dev/null 2>&1; then
    skip "cargo-fuzz is not installed (cargo install cargo-fuzz)"
fi
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
elif [[ ${RUSTC_BOOTSTRAP:-} != 1 ]]; then
    skip "no nightly toolchain (rustup toolchain install nightly, or set RUSTC_BOOTSTRAP=1)"
fi

timeout_s=${QUEEN_FUZZ_TIMEOUT:-20}
cgu=${QUEEN_FUZZ_CODEGEN_UNITS:-1}
rss=${QUEEN_FUZZ_RSS_MB:-3072}
share=$(awk -v m="$minutes" -v n="${#targets[@]}" 'BEGIN { s = int(m * 60 / n); print (s < 1 ? 1 : s) }')
# Release code with debug assertions and overflow checks (cargo-fuzz's default), under
# AddressSanitizer: an overflow is a panic, and a panic is a crash.
build=(cargo "${toolchain[@]}" fuzz build --codegen-units "$cgu")

echo "fuzz: $(cargo "${toolchain[@]}" --version), $(cargo fuzz --version)"
echo "fuzz: building every target"
started=$(date +%s)
if ! build_log=$("${build[@]}" 2>&1); then
    echo "$build_log" | tail -40
    echo "fuzz: the build failed"
    exit 1
fi
echo "fuzz: built in $(($(date +%s) - started)) s; ${share} s per target"

logs=$(mktemp -d)
findings=0
declare -A runs secs speed cover result
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    log="$logs/$t.log"
    # The router targets keep one broker across inputs, so memory an input leaves
    # allocated is the broker's state, not a leak; libFuzzer's leak check scans the heap
    # after every such input (measured: a push took 10 ms with it, 2 ms without).
    leaks=()
    [[ $t == route_* || $t == router ]] && leaks=(-detect_leaks=0)
    echo "fuzz: running $t for ${share} s"
    set +e
    cargo "${toolchain[@]}" fuzz run --codegen-units "$cgu" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$share" -timeout="$timeout_s" -rss_limit_mb="$rss" "${leaks[@]}" \
        -dict=fuzz/queen.dict -print_final_stats=1 >"$log" 2>&1
    status=$?
    set -e
    # A run cut by a finding may lack the final figures: `|| true` keeps set -e quiet.
    runs[$t]=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
    secs[$t]=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1 || true)
    speed[$t]=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
    cover[$t]=$(grep -o 'cov: [0-9]*' "$log" | grep -o '[0-9]*' | tail -1 || true)
    if [[ $status -eq 0 ]] && grep -q '^Done ' "$log"; then
        result[$t]="no finding"
    else
        findings=$((findings + 1))
        result[$t]="FINDING (exit $status)"
        echo "fuzz: $t: FINDING; the end of its log ($log):"
        tail -40 "$log"
        ls -1t "fuzz/artifacts/$t" | head -3 | sed "s|^|fuzz:   artifact fuzz/artifacts/$t/|"
    fi
done

echo
printf '%-18s %12s %8s %9s %8s  %s\n' target executions seconds "exec/s" coverage result
for t in "${targets[@]}"; do
    printf '%-18s %12s %8s %9s %8s  %s\n' "$t" "${runs[$t]:-?}" "${secs[$t]:-?}" "${speed[$t]:-?}" "${cover[$t]:-?}" "${result[$t]}"
done
echo "fuzz: $findings finding(s); logs in $logs"
[[ $findings -eq 0 ]]
