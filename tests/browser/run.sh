#!/usr/bin/env bash
# The web console in headless Chromium: the system's /usr/bin/chromium (Debian `chromium`)
# driven by playwright-core; no browser is downloaded.
#
#   KNOWNGOOD_BIN=target/debug/knowngood bash tests/browser/run.sh
#
# Starts a freshly seeded `knowngood serve` on a free port (console origin
# http://localhost:<port>, so passkeys are bound to `localhost`), installs the pinned
# playwright-core with `npm ci`, runs the tests and always stops the server. Screenshots of
# every page at desktop and phone width land in tests/browser/screenshots/ (git-ignored).
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
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
    echo "run.sh: no Chromium at $CHROMIUM (apt-get install chromium)" >&2
    exit 2
fi

(cd "$HERE" && npm ci --no-audit --no-fund --silent)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/knowngood-browser.XXXXXX")
SERVER_PID=""
cleanup() {
    local rc=$?
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT

DATA="$WORK/data"
mkdir -p -m 700 "$DATA"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
CONFIG="$WORK/knowngood.toml"
cat >"$CONFIG" <<CONF
listen = "127.0.0.1:$PORT"
console_origin = "http://localhost:$PORT"
CONF

kg() { RUST_LOG=${RUST_LOG:-warn} "$BIN" "$@" --data-dir "$DATA" --config "$CONFIG"; }

# The file the Lookup test drops: its hashes are recorded as a vendor release (1.0.0), after
# an older build (0.9.0) that it supersedes.
SAMPLE="$WORK/sample-tool.exe"
printf 'knowngood console test file\n%.0s' $(seq 1 200) >"$SAMPLE"
OLD_SAMPLE="$WORK/sample-tool-0.9.0.exe"
printf 'knowngood console test file, an older build\n%.0s' $(seq 1 200) >"$OLD_SAMPLE"
python3 - "$OLD_SAMPLE" "$SAMPLE" >"$WORK/records.jsonl" <<'PY'
import hashlib, json, sys
for path, version in zip(sys.argv[1:], ["0.9.0", "1.0.0"]):
    data = open(path, "rb").read()
    print(json.dumps({
        "vendor": "example", "executable_name": "sample-tool.exe", "version": version,
        "platform": "windows", "arch": "amd64",
        "hash_sha256": hashlib.sha256(data).hexdigest(),
        "hash_sha1": hashlib.sha1(data).hexdigest(),
        "hash_md5": hashlib.md5(data).hexdigest(),
        "source_url": "https://example.org/sample-tool.exe", "download_verified": True,
    }))
# A signed file, whose certificate the intel pages' test revokes (seed.py).
print(json.dumps({
    "vendor": "example", "executable_name": "signed-tool.exe", "version": "2.0.0",
    "platform": "windows", "arch": "amd64", "hash_sha256": "5" * 64,
    "source_url": "https://example.org/signed-tool.exe", "download_verified": True,
    "sig_signer": "CN=Example Signing <Test>", "sig_issuer": "CN=Example Code Signing CA",
    "sig_serial": "8a1122", "sig_thumbprint": "c0ffee" * 6 + "c0ff",
}))
PY
SIGNED_THUMBPRINT=$(printf 'c0ffee%.0s' 1 2 3 4 5 6)c0ff

kg admin bootstrap >/dev/null
ADMIN_KEY=$(kg admin create-account --team console-teams --tier teams --role account_admin)
# The intel pages' accounts (pages.test.mjs): a teams account admin and a basic-tier auditor.
INTEL_KEY=$(kg admin create-account --team console-intel --tier teams --role account_admin)
BASIC_KEY=$(kg admin create-account --team console-basic --tier basic --role auditor)
# The Lookup and History test's analyst (lookup.test.mjs).
LOOKUP_KEY=$(kg admin create-account --team console-lookup --tier basic --role analyst)
kg admin import-records "$WORK/records.jsonl" >/dev/null
kg translog publish >/dev/null

# The vendor channels are unreachable: every outbound HTTPS request of the daily refresh
# goes to a closed loopback port and fails at once, offline.
CLOSED=http://127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
HTTPS_PROXY=$CLOSED https_proxy=$CLOSED NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost \
    RUST_LOG=${RUST_LOG:-info} "$BIN" serve --data-dir "$DATA" --config "$CONFIG" \
    --listen "127.0.0.1:$PORT" </dev/null >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
    if curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        tail -n 50 "$WORK/server.log" >&2
        exit 3
    fi
    sleep 0.2
done

export KG_CONSOLE="http://localhost:$PORT" KG_ADMIN_KEY="$ADMIN_KEY" KG_SAMPLE="$SAMPLE" KG_OLD_SAMPLE="$OLD_SAMPLE"
export KG_CHROMIUM="$CHROMIUM" KG_SCREENSHOTS="$HERE/screenshots"
export KG_INTEL_KEY="$INTEL_KEY" KG_BASIC_KEY="$BASIC_KEY" KG_DB="$DATA/knowngood.db" \
    KG_SIGNED_THUMBPRINT="$SIGNED_THUMBPRINT" KG_LOOKUP_KEY="$LOOKUP_KEY"
rc=0
(cd "$HERE" && npm test --silent) || rc=$?
if [ "$rc" != 0 ]; then
    echo "run.sh: last server log lines:" >&2
    tail -n 30 "$WORK/server.log" >&2
fi
exit "$rc"
