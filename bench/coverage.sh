#!/usr/bin/env bash
# How much of a real machine the service knows: coverage of package-owned executables,
# libraries and scripts on fresh Debian roots, on this machine, and in a Python environment.
#
#   bash bench/coverage.sh                 # every supported Debian release, this host, Python
#   bash bench/coverage.sh --only roots    # roots | host | python (repeatable)
#
# Reads the real Debian archive and PyPI (not part of .ci/run). Needs root for debootstrap
# (installed with apt-get when missing), python3 with pip, and about 2 GB of disk under
# $COVERAGE_WORK (default: a new directory under /tmp). Builds the release binary unless
# KNOWNGOOD_BIN is set. The truth is each system's own package database (dpkg's lists, the
# wheels' RECORD files), never the service's output; see bench/coverage.py for the method.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if [ -z "${KNOWNGOOD_BIN:-}" ]; then
    cargo build --release -p knowngood --quiet
    KNOWNGOOD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/knowngood"
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
export KNOWNGOOD_BIN
exec python3 "$ROOT/bench/coverage.py" "$@"
