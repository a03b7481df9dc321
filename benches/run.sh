#!/usr/bin/env bash
# Benchmark harness: machine-config-server side by side with nginx serving the same bytes with the
# same certificate, in one run, on loopback. See benches/README.md for what it measures and why.
#
# Usage: benches/run.sh            (environment knobs are listed in benches/README.md)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${MCS_BENCH_DURATION:-10}                # seconds per wrk run
CONNECTIONS=${MCS_BENCH_CONNECTIONS:-32}          # concurrent clients per wrk run
THREADS=${MCS_BENCH_THREADS:-2}                   # wrk threads
ROUNDS=${MCS_BENCH_ROUNDS:-2}                     # wrk runs per server and scenario
COLD_SAMPLES=${MCS_BENCH_COLD_SAMPLES:-5}         # cold renders measured per fixture
# The shared fixture sits next to the main checkout (../shared); worktrees are one level deeper.
FIXTURE=${MCS_BENCH_FIXTURE:-$REPO/../shared/fixtures/bootstrap-realistic}
if [[ -z ${MCS_BENCH_FIXTURE:-} && ! -d $FIXTURE ]]; then
    FIXTURE=$REPO/../../shared/fixtures/bootstrap-realistic
fi
CERT=${MCS_BENCH_CERT:-$REPO/certs/tls.crt}
KEY=${MCS_BENCH_KEY:-$REPO/certs/tls.key}
SYNTHETIC_BYTES=${MCS_BENCH_SYNTHETIC_BYTES:-1860000} # Ignition content per synthetic MachineConfig
SERVERS=${MCS_BENCH_SERVERS:-ours,nginx}          # "nginx" alone checks the harness without our server
KEEP=${MCS_BENCH_KEEP:-0}                         # 1: keep the work directory for inspection
# What Ignition sends (see docs/upstream-mcs.md, "Who calls it").
ACCEPT='application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1'
USER_AGENT='Ignition/2.20.0'

# Targets from issue 8.
TARGET_THROUGHPUT_RATIO=0.8
TARGET_P99_RATIO=1.5
TARGET_RSS_REALISTIC_MB=64
TARGET_RSS_SYNTHETIC_MB=256
TARGET_COLD_MS=20

die() { echo "benches/run.sh: $*" >&2; exit 1; }

missing=()
for tool in nginx wrk curl python3 cargo sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    die "missing tools: ${missing[*]}. Install the baseline and load generator with: apt-get install -y nginx-light wrk"
fi
[[ -d $FIXTURE/machine-pools ]] || die "fixture $FIXTURE not found (set MCS_BENCH_FIXTURE)"
[[ -r $CERT && -r $KEY ]] || die "certificate $CERT / key $KEY not readable (set MCS_BENCH_CERT / MCS_BENCH_KEY)"
run_ours=0
[[ ,$SERVERS, == *,ours,* ]] && run_ours=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcs-bench.XXXXXX")
# nginx workers may run as another user: they must be able to read the served files.
chmod 755 "$WORK"
STARTED=()

cleanup() {
    local pid
    for pid in "${STARTED[@]}"; do
        stop_pid "$pid"
    done
    if [[ $KEEP == 1 ]]; then
        echo "work directory kept: $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# curl as Ignition would call us. Extra arguments go before the URL.
fetch() {
    curl --silent --show-error --insecure --max-time 30 \
        -H "Accept: $ACCEPT" -H "User-Agent: $USER_AGENT" -H 'Accept-Encoding: identity' "$@"
}

# wait_ready URL PID LOG: poll until URL answers 200, for at most 30 s.
wait_ready() {
    local url=$1 pid=$2 log=$3
    for _ in $(seq 300); do
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "process $pid exited (log above)"; }
        [[ $(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true) == 200 ]] && return 0
        sleep 0.1
    done
    tail -n 20 "$log" >&2
    die "$url not ready after 30 s"
}

peak_rss_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# The rendered MachineConfig file a bootstrap pool points at.
mc_file() {
    local dir=$1 pool=$2 name
    name=$(awk '/^status:/ { s = 1 } s && /^    name:/ { print $2; exit }' "$dir/machine-pools/$pool.yaml")
    echo "$dir/machine-configs/$name.yaml"
}

start_ours() { # NAME BASEDIR -> sets OURS_PID, OURS_PORT
    local name=$1 dir=$2
    OURS_PORT=$(free_port)
    "$REPO/target/release/machine-config-server" bootstrap \
        --server-basedir "$dir" --bootstrap-kubeconfig "$dir/kubeconfig" \
        --cert "$CERT" --key "$KEY" --secure-port "$OURS_PORT" --insecure-port 0 \
        --bind-address 127.0.0.1 --metrics-bind-address "" \
        >"$WORK/ours-$name.log" 2>&1 &
    OURS_PID=$!
    STARTED+=("$OURS_PID")
    wait_ready "https://127.0.0.1:$OURS_PORT/healthz" "$OURS_PID" "$WORK/ours-$name.log"
}

# stop_pid PID: stop a process this script started and forget it.
stop_pid() {
    local pid=$1 keep=() p
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${STARTED[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    STARTED=("${keep[@]}")
}

start_nginx() { # NAME WWWROOT -> sets NGINX_PID, NGINX_PORT
    local name=$1 root=$2 prefix="$WORK/nginx-$1"
    NGINX_PORT=$(free_port)
    mkdir -p "$prefix/logs" "$prefix/tmp"
    cat >"$prefix/nginx.conf" <<EOF
worker_processes $(nproc);
daemon off;
pid $prefix/nginx.pid;
error_log $prefix/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $prefix/tmp/body;
    proxy_temp_path $prefix/tmp/proxy;
    fastcgi_temp_path $prefix/tmp/fastcgi;
    uwsgi_temp_path $prefix/tmp/uwsgi;
    scgi_temp_path $prefix/tmp/scgi;
    types { }
    default_type application/json;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=64;
    keepalive_requests 100000000;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:mcsbench:10m;
    ssl_session_tickets on;
    server {
        listen 127.0.0.1:$NGINX_PORT ssl;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        root $root;
        location = /healthz { return 200; }
    }
}
EOF
    nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log" >"$prefix/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    STARTED+=("$NGINX_PID")
    wait_ready "https://127.0.0.1:$NGINX_PORT/healthz" "$NGINX_PID" "$prefix/logs/error.log"
}

nginx_peak_rss_kb() { # sum over the master and its workers
    local total=0 pid
    for pid in "$1" $(pgrep -P "$1" || true); do
        total=$((total + $(peak_rss_kb "$pid")))
    done
    echo "$total"
}

# run_wrk LABEL PATHS URLBASE [wrk args]: one bounded wrk run, rotating over PATHS. Every round
# appends its RESULT line to the same file.
run_wrk() {
    local label=$1 paths=$2 base=$3 out
    shift 3
    out="$WORK/wrk-$label.txt"
    MCS_BENCH_PATHS=$paths timeout $((DURATION + 60)) \
        wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" --timeout 10s --latency \
        -s "$REPO/benches/wrk/report.lua" \
        -H "Accept: $ACCEPT" -H "User-Agent: $USER_AGENT" -H 'Accept-Encoding: identity' \
        "$@" "$base" >"$out.last" 2>&1 || die "wrk $label failed: $(tail -n 5 "$out.last")"
    grep '^RESULT ' "$out.last" >>"$out" || die "wrk $label printed no result: $(tail -n 5 "$out.last")"
    cat "$out.last" >>"$out.log"
}

# Aggregates over the rounds of a label's RESULT lines.
results() { # LABEL AWK-PROGRAM over fields f["name"]
    awk -v prog="$2" '
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] += kv[2] } n++ }
        END {
            if (prog == "rps") printf "%.0f", f["requests"] * 1e6 / f["duration_us"]
            if (prog == "p99") printf "%.0f", f["p99_us"] / n
            if (prog == "errors") printf "%d", f["connect_errors"] + f["read_errors"] + f["write_errors"] + f["status_errors"] + f["timeouts"]
        }' "$WORK/wrk-$1.txt"
}
rps() { results "$1" rps; }
p99_ms() { awk -v v="$(results "$1" p99)" 'BEGIN { printf "%.2f ms", v / 1000 }'; }

ROWS=()
# row SCENARIO OURS NGINX RATIO TARGET VERDICT [NOTE]
row() { ROWS+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' "$1" "$2" "$3" "$4" "$5" "$6" "${7:-}")"); }

# compare SCENARIO KIND(rps|p99) OURS_LABEL NGINX_LABEL
compare() {
    local scenario=$1 kind=$2 a=$3 b=$4 ours theirs ratio verdict target note=""
    if [[ $kind == rps ]]; then
        ours=$(rps "$a"); theirs=$(rps "$b")
        ratio=$(awk -v o="$ours" -v t="$theirs" 'BEGIN { printf "%.2f", (t > 0 ? o / t : 0) }')
        target=">= $TARGET_THROUGHPUT_RATIO"
        verdict=$(awk -v r="$ratio" -v t="$TARGET_THROUGHPUT_RATIO" 'BEGIN { print (r >= t ? "pass" : "FAIL") }')
        ours="$ours req/s"; theirs="$theirs req/s"
    else
        ours=$(results "$a" p99); theirs=$(results "$b" p99)
        ratio=$(awk -v o="$ours" -v t="$theirs" 'BEGIN { printf "%.2f", (t > 0 ? o / t : 0) }')
        target="<= $TARGET_P99_RATIO"
        verdict=$(awk -v r="$ratio" -v t="$TARGET_P99_RATIO" 'BEGIN { print (r <= t ? "pass" : "FAIL") }')
        ours=$(awk -v v="$ours" 'BEGIN { printf "%.2f ms", v / 1000 }')
        theirs=$(awk -v v="$theirs" 'BEGIN { printf "%.2f ms", v / 1000 }')
    fi
    local errors_ours errors_nginx
    errors_ours=$(results "$a" errors); errors_nginx=$(results "$b" errors)
    if ((errors_ours > 0 || errors_nginx > 0)); then
        note="errors: ours $errors_ours, nginx $errors_nginx (see wrk output)"
        ((errors_ours > 0)) && verdict=FAIL
    fi
    row "$scenario" "$ours" "$theirs" "$ratio" "$target" "$verdict" "$note"
}

# Fetch what our server returns for each path once; nginx serves exactly those bytes.
# Without our server (SERVERS=nginx), nginx serves the MachineConfig files themselves.
prepare_www() { # DIR POOLS WWW
    local dir=$1 pools=$2 www=$3 pool code
    mkdir -p "$www/config"
    for pool in ${pools//,/ }; do
        if ((run_ours)); then
            code=$(fetch -o "$www/config/$pool" -w '%{http_code}' "https://127.0.0.1:$OURS_PORT/config/$pool")
            [[ $code == 200 ]] || die "our server answered $code for /config/$pool"
        else
            cp "$(mc_file "$dir" "$pool")" "$www/config/$pool"
        fi
    done
    chmod -R a+rX "$www"
}

verify_same_bytes() { # POOLS WWW
    local pool
    for pool in ${1//,/ }; do
        fetch -o "$WORK/nginx-check" "https://127.0.0.1:$NGINX_PORT/config/$pool"
        cmp -s "$WORK/nginx-check" "$2/config/$pool" || die "nginx does not serve the same bytes for /config/$pool"
    done
}

# cold_render DIR POOL: rewrite the pool's MachineConfig (a real change: an annotation), then
# time the first request that returns the new body. Prints "median max" in ms.
cold_render() {
    local dir=$1 pool=$2 mc before timing code i samples=()
    mc=$(mc_file "$dir" "$pool")
    for i in $(seq "$COLD_SAMPLES"); do
        before=$(fetch "https://127.0.0.1:$OURS_PORT/config/$pool" | sha256sum)
        sed -i "s/release-image-version: .*/release-image-version: \"bench-cold-$i-$$\"/" "$mc"
        timing=""
        for _ in $(seq 1000); do
            read -r code timing < <(fetch -o "$WORK/cold-body" -w '%{http_code} %{time_total}\n' \
                "https://127.0.0.1:$OURS_PORT/config/$pool")
            if [[ $code == 200 && $(sha256sum <"$WORK/cold-body") != "$before" ]]; then
                break
            fi
            timing=""
            sleep 0.01
        done
        [[ -n $timing ]] || die "the change to $mc was not served within the polling bound"
        samples+=("$timing")
    done
    printf '%s\n' "${samples[@]}" | sort -g |
        awk '{ v[NR] = $1 * 1000 } END { printf "%.1f %.1f", v[int((NR + 1) / 2)], v[NR] }'
}

# bench_fixture NAME DIR POOLS RSS_TARGET_MB
bench_fixture() {
    local name=$1 dir=$2 pools=$3 rss_target=$4 www="$WORK/www-$1" paths="" pool size
    for pool in ${pools//,/ }; do paths+="/config/$pool "; done
    if ((run_ours)); then start_ours "$name" "$dir"; fi
    prepare_www "$dir" "$pools" "$www"
    start_nginx "$name" "$www"
    verify_same_bytes "$pools" "$www"
    size=$(stat -c %s "$www/config/${pools%%,*}")
    echo "== $name: pools $pools, body $((size / 1024)) KiB, ${DURATION}s per run, $CONNECTIONS connections" >&2

    # Rounds alternate the order (nginx, ours, then ours, nginx, ...) so that load from
    # elsewhere on a shared machine drifts into both sides alike.
    local scenario label round order
    for scenario in keepalive close; do
        local extra=()
        [[ $scenario == close ]] && extra=(-H 'Connection: close')
        for round in $(seq "$ROUNDS"); do
            order="nginx ours"
            ((round % 2 == 0)) && order="ours nginx"
            for label in $order; do
                [[ $label == ours ]] && ((run_ours == 0)) && continue
                local port=$NGINX_PORT
                [[ $label == ours ]] && port=$OURS_PORT
                echo "   round $round: wrk $scenario against $label" >&2
                run_wrk "$name-$scenario-$label" "$paths" "https://127.0.0.1:$port" "${extra[@]}"
            done
        done
    done

    if ((run_ours)); then
        compare "$name: keep-alive throughput" rps "$name-keepalive-ours" "$name-keepalive-nginx"
        compare "$name: Connection: close throughput" rps "$name-close-ours" "$name-close-nginx"
        compare "$name: p99 latency, keep-alive" p99 "$name-keepalive-ours" "$name-keepalive-nginx"
        compare "$name: p99 latency, Connection: close" p99 "$name-close-ours" "$name-close-nginx"
        local rss nginx_rss cold
        rss=$(peak_rss_kb "$OURS_PID")
        nginx_rss=$(nginx_peak_rss_kb "$NGINX_PID")
        row "$name: peak RSS under load" "$((rss / 1024)) MB" "$((nginx_rss / 1024)) MB" "-" \
            "< $rss_target MB" "$( ((rss < rss_target * 1024)) && echo pass || echo FAIL)" "VmHWM; nginx: master + workers"
        echo "   cold renders" >&2
        cold=$(cold_render "$dir" "${pools%%,*}")
        row "$name: first request after a change" "${cold% *} ms" "-" "-" "< $TARGET_COLD_MS ms" \
            "$(awk -v m="${cold#* }" -v t="$TARGET_COLD_MS" 'BEGIN { print (m < t ? "pass" : "FAIL") }')" \
            "median of $COLD_SAMPLES, max ${cold#* } ms, whole request incl. TLS handshake"
        stop_pid "$OURS_PID"
    else
        local s
        for s in keepalive close; do
            row "$name: $s throughput (nginx only)" "-" "$(rps "$name-$s-nginx") req/s" "-" "-" "-"
            row "$name: $s p99 (nginx only)" "-" "$(p99_ms "$name-$s-nginx")" "-" "-" "-"
        done
    fi
    stop_pid "$NGINX_PID"
}

if ((run_ours)); then
    echo "building machine-config-server (release)" >&2
    (cd "$REPO" && cargo build --release --quiet --bin machine-config-server)
fi

# The realistic fixture, copied so the cold-render step may edit it.
cp -r "$FIXTURE" "$WORK/realistic"
chmod -R u+w "$WORK/realistic"
bench_fixture realistic "$WORK/realistic" master "$TARGET_RSS_REALISTIC_MB"

# Synthetic multi-megabyte configs: bootstrap mode serves the master and arbiter pools.
python3 "$REPO/benches/gen_bootstrap.py" "$WORK/synthetic" --template "$FIXTURE" \
    --pools master,arbiter --config-bytes "$SYNTHETIC_BYTES"
bench_fixture synthetic "$WORK/synthetic" master,arbiter "$TARGET_RSS_SYNTHETIC_MB"

mkdir -p "$REPO/benches/results"
RESULTS="$REPO/benches/results/$(date -u +%Y%m%dT%H%M%SZ).txt"
{
    echo "machine-config-server vs nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), $(date -u +%Y-%m-%dT%H:%MZ)," \
        "$(nproc) cores, wrk -t$THREADS -c$CONNECTIONS, $ROUNDS x ${DURATION}s per server and scenario"
    {
        printf 'scenario\tours\tnginx\tratio\ttarget\tresult\tnote\n'
        printf '%s\n' "${ROWS[@]}"
    } | column -t -s $'\t'
} | tee "$RESULTS"
echo "saved to ${RESULTS#"$REPO"/}" >&2
