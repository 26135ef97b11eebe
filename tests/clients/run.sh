#!/usr/bin/env bash
# Third-party client suite: real Python clients (PyJWT, PyNaCl, schemathesis, requests,
# stix2-validator, stix2, taxii2-client, feedparser, jsonschema, pyotp, soft-webauthn,
# PyHashlookup, MISP's hashlookup expansion module, flor, the SBOM generators cyclonedx-py
# and spdx-tools)
# against a real, freshly seeded `knowngood serve`.
#
#   KNOWNGOOD_BIN=target/debug/knowngood bash tests/clients/run.sh [pytest args...]
#
# Builds nothing: the binary comes from $KNOWNGOOD_BIN (default target/debug/knowngood).
# Creates or reuses the venv at .venv (repo root) with tests/clients/requirements.txt,
# starts the server on a free 127.0.0.1 port with a fresh temporary data dir, seeds it,
# runs pytest and always stops the server. The exit code is pytest's.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"

BIN=${KNOWNGOOD_BIN:-target/debug/knowngood}
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
if [ ! -x "$BIN" ]; then
    echo "run.sh: no executable knowngood binary at $BIN (build it, or set KNOWNGOOD_BIN)" >&2
    exit 2
fi

# --- venv -------------------------------------------------------------------------------
PYTHON=${PYTHON:-python3}
VENV="$ROOT/.venv"
REQ="$HERE/requirements.txt"
STAMP="$VENV/.clients-requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
    echo "$want" >"$STAMP"
fi

# --- server -----------------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/knowngood-clients.XXXXXX")
SERVER_PID=""
PYTEST_PID=""
cleanup() {
    local rc=$?
    if [ -n "$PYTEST_PID" ] && kill -0 "$PYTEST_PID" 2>/dev/null; then
        kill -TERM "$PYTEST_PID" 2>/dev/null || true
        wait "$PYTEST_PID" 2>/dev/null || true
    fi
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [ "${KEEP_WORK:-0}" = 1 ]; then
        echo "run.sh: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

DATA="$WORK/data"
mkdir -p -m 700 "$DATA"
PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
CONFIG="$WORK/knowngood.toml"
cat >"$CONFIG" <<EOF
listen = "127.0.0.1:$PORT"

[limits]
hash_of_day_per_ip = 100000
public_per_ip = 100000
token_per_key = 100000
authenticated_per_key = 100000
# The JWT suite sends many refused tokens on purpose: they must be answered 401, not 429.
failed_auth_per_ip = 100000
failed_auth_per_team = 100000
EOF

kg() { RUST_LOG=${RUST_LOG:-warn} "$BIN" "$@" --data-dir "$DATA" --config "$CONFIG"; }

# Seed before serving: the accounts, a few vendor records and the day's transparency root.
OWNER_KEY=$(kg admin bootstrap)
BASIC_ANALYST_KEY=$(kg admin create-account --team clients-basic --tier basic --role analyst)
TEAMS_ADMIN_KEY=$(kg admin create-account --team clients-teams --tier teams --role account_admin)
ENTERPRISE_ADMIN_KEY=$(kg admin create-account --team clients-enterprise --tier enterprise --role account_admin)
FREE_ANALYST_KEY=$(kg admin create-account --team clients-free --tier free --role analyst)
kg admin import-records "$HERE/records.jsonl" >"$WORK/import.out"
kg translog publish >"$WORK/publish.out"
echo "run.sh: import: $(cat "$WORK/import.out"); translog: $(cat "$WORK/publish.out")"

# The vendor channels are unreachable: every outbound HTTPS request of the daily refresh
# goes to a closed loopback port and fails at once, offline.
CLOSED=http://127.0.0.1:$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
HTTPS_PROXY=$CLOSED https_proxy=$CLOSED NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost \
    RUST_LOG=${RUST_LOG:-info} "$BIN" serve --data-dir "$DATA" --config "$CONFIG" \
    --listen "127.0.0.1:$PORT" </dev/null >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

URL="http://127.0.0.1:$PORT"
ready=0
for _ in $(seq 1 300); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "run.sh: the server exited during start-up:" >&2
        tail -n 50 "$WORK/server.log" >&2
        exit 3
    fi
    if "$VENV/bin/python" - "$URL/readyz" <<'PY' 2>/dev/null; then
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
        ready=1
        break
    fi
    sleep 0.2
done
if [ "$ready" != 1 ]; then
    echo "run.sh: $URL/readyz never answered 200" >&2
    tail -n 50 "$WORK/server.log" >&2
    exit 3
fi

export KG_URL="$URL" KG_DATA_DIR="$DATA" KG_RECORDS="$HERE/records.jsonl"
# Suites that record more files while the server runs use the same binary and config.
export KG_BIN="$BIN" KG_CONFIG="$CONFIG"
export KG_OWNER_KEY="$OWNER_KEY" KG_BASIC_ANALYST_KEY="$BASIC_ANALYST_KEY"
export KG_TEAMS_ADMIN_KEY="$TEAMS_ADMIN_KEY" KG_ENTERPRISE_ADMIN_KEY="$ENTERPRISE_ADMIN_KEY"
export KG_FREE_ANALYST_KEY="$FREE_ANALYST_KEY"
# Hypothesis (under schemathesis) keeps caches on disk: inside the venv, not the work tree.
export HYPOTHESIS_STORAGE_DIRECTORY="$VENV/.hypothesis"

# In the background and waited for, so that a signal to this script runs the trap at once
# instead of after pytest.
rc=0
"$VENV/bin/python" -m pytest "$HERE" -p no:cacheprovider -rfE "$@" &
PYTEST_PID=$!
wait "$PYTEST_PID" || rc=$?
PYTEST_PID=""
if [ "$rc" != 0 ]; then
    echo "run.sh: last server log lines:" >&2
    tail -n 30 "$WORK/server.log" >&2
fi
exit "$rc"
