#!/usr/bin/env bash
# Runs every fuzz target for a bounded time, on stable Rust (`-s none`: coverage-guided
# libFuzzer without a sanitizer, which would need nightly).
#
#   bash fuzz/run.sh [seconds per target]      # default 25
#   bash fuzz/run.sh 300 crl sbom              # chosen targets only
#
# Installs cargo-fuzz from crates.io when it is missing, writes the seed inputs
# (`cargo run -p testkit --example fuzz_seeds`) into fuzz/corpus/<target>/, where libFuzzer
# also keeps the new inputs it finds (git-ignored), builds the targets once, then runs each.
# A crash, panic, timeout (10 s per input) or out-of-memory leaves the input in
# fuzz/artifacts/<target>/ and fails the script; replay it with
# `cargo fuzz run -s none <target> fuzz/artifacts/<target>/<file>`.
set -euo pipefail

SECS=${1:-25}
shift || true
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/fuzz"

cargo run -q --locked -p testkit --example fuzz_seeds -- fuzz/corpus
cargo fuzz build -s none --target-dir "$TARGET_DIR"
if [ "$#" -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi
for target in "${targets[@]}"; do
    echo "== fuzz $target (${SECS} s)"
    log="$TARGET_DIR/$target.log"
    status=0
    cargo fuzz run -s none --target-dir "$TARGET_DIR" "$target" -- \
        -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done [0-9]+ runs)' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log" >&2
        echo "fuzz $target failed: the input is in fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
