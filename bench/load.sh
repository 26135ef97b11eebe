#!/usr/bin/env bash
# Load and failure test: two replicas on PostgreSQL and Redis behind a round-robin proxy,
# mixed traffic for five minutes, PostgreSQL restarted once and Redis stopped for 30 s in
# the middle.
#
#   bash bench/load.sh [seconds]          # default 300
#
# Everything runs privately: its own PostgreSQL cluster (initdb in a temporary directory,
# on a free port; as the `postgres` user when run as root) and its own redis-server on a
# free port, so the restarts touch nothing else on the machine. It loads generated vendor
# records with `knowngood admin import-records`, creates the platform owner and an analyst
# key of an enterprise account with `knowngood admin bootstrap` / `create-account`, starts
# two `knowngood serve` replicas sharing the database, Redis and secrets, and runs the load
# generator (`crates/knowngood/examples/load.rs`), which puts a round-robin TCP proxy in
# front of them.
#
# Schedule (fractions of the duration): warm-up to 20 %; PostgreSQL `pg_ctl restart -m
# fast` at 40 %; Redis stopped at 60 % for LOAD_REDIS_DOWN seconds (default 30) and started
# again. The generator prints per route p50/p99, 5xx and unanswered requests inside and
# outside the outage windows, and each replica's resident memory at the end of the warm-up
# and at the end; it exits 1 on a 5xx or unanswered request outside the windows or on 5 %
# memory growth.
#
# Needs PostgreSQL's server binaries (/usr/lib/postgresql/*/bin), redis-server, curl and
# python3. Builds the release binary and generator unless KNOWNGOOD_BIN / LOAD_BIN are set.
# LOAD_RECORDS (default 2000), LOAD_CONCURRENCY (default 16) tune the load.
set -euo pipefail

DURATION=${1:-300}
RECORDS=${LOAD_RECORDS:-2000}
CONCURRENCY=${LOAD_CONCURRENCY:-16}
REDIS_DOWN=${LOAD_REDIS_DOWN:-30}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
for tool in redis-server redis-cli curl python3; do
    command -v "$tool" >/dev/null || { echo "load.sh: $tool is needed" >&2; exit 2; }
done
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$PGBIN/initdb" ] || { echo "load.sh: PostgreSQL server binaries are needed" >&2; exit 2; }

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ -z "${KNOWNGOOD_BIN:-}" ] || [ -z "${LOAD_BIN:-}" ]; then
    cargo build --release -p knowngood --bin knowngood --example load --quiet
fi
KNOWNGOOD_BIN=${KNOWNGOOD_BIN:-$TARGET/release/knowngood}
LOAD_BIN=${LOAD_BIN:-$TARGET/release/examples/load}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/knowngood-load.XXXXXX")
chmod 755 "$WORK"
PIDS=()
as_pg() {
    if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi
}
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -f "$WORK/redis.pid" ]; then
        kill -TERM "$(cat "$WORK/redis.pid")" 2>/dev/null || true
        for _ in $(seq 1 50); do
            redis-cli -p "${REDIS_PORT:-0}" ping >/dev/null 2>&1 || break
            sleep 0.1
        done
    fi
    if [ -f "$WORK/pg/postmaster.pid" ]; then
        as_pg "'$PGBIN/pg_ctl' -D '$WORK/pg' -m immediate stop" >/dev/null 2>&1 || true
    fi
    if [ -n "${LOAD_KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
PG_PORT=$(free_port)
REDIS_PORT=$(free_port)
PORT_A=$(free_port)
PORT_B=$(free_port)

# Private PostgreSQL.
mkdir -p "$WORK/pg" "$WORK/pgsock"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg" "$WORK/pgsock"
as_pg "'$PGBIN/initdb' -D '$WORK/pg' -A trust -U postgres --no-sync" >"$WORK/initdb.log" 2>&1
pg_ctl() {
    as_pg "'$PGBIN/pg_ctl' -D '$WORK/pg' -l '$WORK/pg/server.log' -w $* \
        -o '-p $PG_PORT -k $WORK/pgsock -c listen_addresses=127.0.0.1 -c max_connections=200'"
}
pg_ctl start >/dev/null
DB_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"

# Private Redis, nothing persisted.
start_redis() {
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
        >>"$WORK/redis.log" 2>&1 &
    echo $! >"$WORK/redis.pid"
    for _ in $(seq 1 50); do
        redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "load.sh: redis-server did not start" >&2
    exit 1
}
start_redis

cat >"$WORK/knowngood.toml" <<TOML
[schedule]
daily_refresh = "off"

[limits]
hash_of_day_per_ip = 4000000000
public_per_ip = 4000000000
token_per_key = 4000000000
authenticated_per_key = 4000000000

[connections]
max_per_address = 100000
max_total = 100000
TOML
export KNOWNGOOD_DATABASE_URL="$DB_URL" KNOWNGOOD_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export KNOWNGOOD_CONFIG="$WORK/knowngood.toml" RUST_LOG=warn KNOWNGOOD_LOG_FORMAT=json
mkdir -p -m 700 "$WORK/a" "$WORK/b"
kg() { "$KNOWNGOOD_BIN" "$@" --data-dir "$WORK/a"; }

# The platform owner (this also generates the secrets in the first data dir), then the
# secrets every replica shares, an analyst key of an enterprise account, and the records.
kg admin bootstrap >/dev/null
KNOWNGOOD_HMAC_SECRET=$(cat "$WORK/a/secrets/hmac.key")
KNOWNGOOD_JWT_PRIVATE_KEY_PEM=$(cat "$WORK/a/secrets/jwt-rsa.pem")
KNOWNGOOD_LOG_SIGNING_KEY=$(cat "$WORK/a/secrets/translog-ed25519.key")
export KNOWNGOOD_HMAC_SECRET KNOWNGOOD_JWT_PRIVATE_KEY_PEM KNOWNGOOD_LOG_SIGNING_KEY
KEY=$(kg admin create-account --team load-test --tier enterprise --role analyst | tail -n 1)
python3 - "$RECORDS" >"$WORK/records.jsonl" <<'PY'
import hashlib, json, sys
for i in range(int(sys.argv[1])):
    h = lambda algo: hashlib.new(algo, f"load-file-{i}".encode()).hexdigest()
    print(json.dumps({
        "vendor": f"Vendor {i % 50}", "executable_name": f"tool{i}.exe", "version": f"1.{i % 7}.0",
        "platform": "windows", "arch": "amd64",
        "hash_sha256": h("sha256"), "hash_sha1": h("sha1"), "hash_md5": h("md5"),
        "source_url": f"https://downloads.example.com/tool{i}/tool{i}.exe",
        "download_verified": True,
    }))
PY
kg admin import-records "$WORK/records.jsonl" >/dev/null

for replica in a:$PORT_A b:$PORT_B; do
    dir=${replica%%:*} port=${replica#*:}
    KNOWNGOOD_LISTEN="127.0.0.1:$port" "$KNOWNGOOD_BIN" serve --data-dir "$WORK/$dir" \
        </dev/null >"$WORK/server-$dir.log" 2>&1 &
    PIDS+=($!)
done
for port in "$PORT_A" "$PORT_B"; do
    for _ in $(seq 1 200); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || {
        echo "load.sh: a replica did not become ready; its log:" >&2
        cat "$WORK"/server-*.log >&2
        exit 1
    }
done

now_ms() { date +%s%3N; }
# The outages, on their own schedule while the generator runs.
outages() {
    sleep "$(python3 -c "print($DURATION * 0.4)")"
    local start end
    start=$(now_ms)
    pg_ctl -m fast restart >/dev/null
    until as_pg "'$PGBIN/pg_isready' -q -h 127.0.0.1 -p $PG_PORT"; do sleep 0.1; done
    end=$(now_ms)
    echo "postgres-restart $start $end" >>"$WORK/events"
    echo "  postgres restarted ($(( end - start )) ms)"

    sleep "$(python3 -c "print(max(0, $DURATION * 0.2 - ($end - $start) / 1000))")"
    start=$(now_ms)
    local redis_pid
    redis_pid=$(cat "$WORK/redis.pid")
    kill -TERM "$redis_pid"
    while redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
    echo "  redis stopped for $REDIS_DOWN s"
    sleep "$REDIS_DOWN"
    start_redis
    end=$(now_ms)
    echo "redis-stop $start $end" >>"$WORK/events"
    echo "  redis started again"
}
outages &
OUTAGES_PID=$!

set +e
"$LOAD_BIN" --backend "127.0.0.1:$PORT_A" --backend "127.0.0.1:$PORT_B" --key "$KEY" \
    --records "$RECORDS" --duration "$DURATION" --warmup "$(( DURATION / 5 ))" \
    --concurrency "$CONCURRENCY" --pid "${PIDS[0]}" --pid "${PIDS[1]}" --events "$WORK/events"
status=$?
set -e
wait "$OUTAGES_PID" 2>/dev/null || true
for dir in a b; do
    errors=$(grep -c '"level":"ERROR"' "$WORK/server-$dir.log" || true)
    echo "replica $dir: $errors error lines in its log"
done
exit "$status"
