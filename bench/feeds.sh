#!/usr/bin/env bash
# Cached public feeds against nginx serving the same bytes from a file.
#
#   bash bench/feeds.sh [records]          # default 10,000 records
#
# Loads the records (generated here) into a fresh data dir, starts the release binary with
# the per-address limits lifted (the benchmark's one client would otherwise be answered
# 429), warms the caches, saves each answer to a file, serves those files with nginx
# (Debian package, sendfile on), and runs the same wrk load against both in one run:
# requests/s of `GET /public/feed/stix` and `GET /public/hash-of-day`, and the ratio
# knowngood / nginx (goal: at least 0.8). Needs `nginx` and `wrk`
# (`apt-get install -y nginx wrk`); builds the release binary unless KNOWNGOOD_BIN is set.
set -euo pipefail

RECORDS=${1:-10000}
DURATION=${BENCH_DURATION:-10s}
CONNECTIONS=${BENCH_CONNECTIONS:-32}
THREADS=${BENCH_THREADS:-2}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
for tool in nginx wrk curl python3; do
    command -v "$tool" >/dev/null || { echo "feeds.sh: $tool is needed" >&2; exit 2; }
done
if [ -z "${KNOWNGOOD_BIN:-}" ]; then
    cargo build --release -p knowngood --quiet
    KNOWNGOOD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/knowngood"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/knowngood-feeds-bench.XXXXXX")
SERVER_PID=""
NGINX_PID=""
cleanup() {
    for pid in "$SERVER_PID" "$NGINX_PID"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
KG_PORT=$(free_port)
NGINX_PORT=$(free_port)
DATA="$WORK/data"
mkdir -p -m 700 "$DATA"
cat >"$WORK/knowngood.toml" <<TOML
listen = "127.0.0.1:$KG_PORT"

[schedule]
daily_refresh = "off"

[limits]
hash_of_day_per_ip = 4000000000
public_per_ip = 4000000000

[connections]
max_per_address = 100000
max_total = 100000
TOML
kg() { RUST_LOG=warn "$KNOWNGOOD_BIN" "$@" --data-dir "$DATA" --config "$WORK/knowngood.toml"; }

# Records: one family each, three hashes, as vendors publish them.
python3 - "$RECORDS" >"$WORK/records.jsonl" <<'PY'
import hashlib, json, sys
for i in range(int(sys.argv[1])):
    h = lambda algo: hashlib.new(algo, f"bench-file-{i}".encode()).hexdigest()
    print(json.dumps({
        "vendor": f"Vendor {i % 50}", "executable_name": f"tool{i}.exe", "version": f"1.{i % 7}.0",
        "platform": "windows", "arch": "amd64",
        "hash_sha256": h("sha256"), "hash_sha1": h("sha1"), "hash_md5": h("md5"),
        "source_url": f"https://downloads.example.com/tool{i}/tool{i}.exe",
        "download_verified": True, "sig_signer": None, "sig_issuer": None,
        "sig_serial": None, "sig_thumbprint": None,
    }))
PY
kg admin import-records "$WORK/records.jsonl" >/dev/null

RUST_LOG=warn "$KNOWNGOOD_BIN" serve --data-dir "$DATA" --config "$WORK/knowngood.toml" \
    </dev/null >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$KG_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

# The same bytes nginx will serve; fetching them also fills the caches.
mkdir -p "$WORK/www/public/feed"
curl -fsS "http://127.0.0.1:$KG_PORT/public/feed/stix" -o "$WORK/www/public/feed/stix"
curl -fsS "http://127.0.0.1:$KG_PORT/public/hash-of-day" -o "$WORK/www/public/hash-of-day"

# nginx's workers run as an unprivileged user when started as root: let them read the files.
chmod 755 "$WORK" "$WORK/www" "$WORK/www/public" "$WORK/www/public/feed"
chmod 644 "$WORK/www/public/feed/stix" "$WORK/www/public/hash-of-day"
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes auto;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    default_type application/json;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $WORK/www;
    }
}
CONF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$NGINX_PORT/public/hash-of-day" -o /dev/null 2>/dev/null && break
    sleep 0.1
done

for route in /public/feed/stix /public/hash-of-day; do
    if ! curl -fsS "http://127.0.0.1:$NGINX_PORT$route" | cmp -s - "$WORK/www$route"; then
        echo "feeds.sh: nginx does not serve the saved $route" >&2
        exit 1
    fi
done

rps() {
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" "$1" | awk '/^Requests\/sec:/ {print $2}'
}
echo "records: $RECORDS; wrk -t$THREADS -c$CONNECTIONS -d$DURATION; knowngood $(basename "$KNOWNGOOD_BIN") on :$KG_PORT, nginx on :$NGINX_PORT"
printf '%-22s %10s %14s %14s %8s\n' route bytes knowngood_rps nginx_rps ratio
for route in /public/feed/stix /public/hash-of-day; do
    bytes=$(stat -c %s "$WORK/www$route")
    ours=$(rps "http://127.0.0.1:$KG_PORT$route")
    theirs=$(rps "http://127.0.0.1:$NGINX_PORT$route")
    ratio=$(python3 -c "print(f'{float($ours) / float($theirs):.2f}')")
    printf '%-22s %10s %14s %14s %8s\n' "$route" "$bytes" "$ours" "$theirs" "$ratio"
done
if grep -q '"cache_hit":false' <(curl -fsS "http://127.0.0.1:$KG_PORT/public/hash-of-day"); then
    echo "feeds.sh: the hash-of-day answer was not served from the cache" >&2
    exit 1
fi
