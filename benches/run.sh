#!/usr/bin/env bash
# Benchmark harness: machine-config-server, in its default (AWS-LC) build and its OpenSSL build, side by side
# with nginx serving the same bytes with the same certificate, in one run, on loopback. See
# benches/README.md for what it measures and why.
#
# Usage: benches/run.sh            (environment knobs are listed in benches/README.md)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${MCS_BENCH_DURATION:-10}                # seconds per wrk run
CONNECTIONS=${MCS_BENCH_CONNECTIONS:-32}          # concurrent clients per wrk run
THREADS=${MCS_BENCH_THREADS:-2}                   # wrk threads
ROUNDS=${MCS_BENCH_ROUNDS:-5}                     # wrk runs per server and scenario (ratios: median of the rounds)
COLD_SAMPLES=${MCS_BENCH_COLD_SAMPLES:-5}         # cold renders measured per fixture
# The project's full-size fixture; MCS_BENCH_FIXTURE may name another bootstrap directory (e.g.
# the upstream-rendered one under $MCS_UPSTREAM_ASSETS/fixtures/bootstrap-realistic).
FIXTURE=${MCS_BENCH_FIXTURE:-$REPO/tests/fixtures/generated/bootstrap-full}
CERT=${MCS_BENCH_CERT:-$REPO/certs/tls.crt}
CA=${MCS_BENCH_CA:-$REPO/certs/ca.crt}            # loadgen checks the certificate against it
KEY=${MCS_BENCH_KEY:-$REPO/certs/tls.key}
SYNTHETIC_BYTES=${MCS_BENCH_SYNTHETIC_BYTES:-1860000} # Ignition content per synthetic MachineConfig
SERVERS=${MCS_BENCH_SERVERS:-ours,nginx}          # "nginx" alone checks the harness without our server
BUILDS=${MCS_BENCH_BUILDS:-aws-lc,openssl}        # our builds: crypto backend (cargo feature) of each
# Prebuilt binaries instead of building (LABEL=PATH,...; e.g. two commits side by side): the
# label's targets are the OpenSSL build's when it contains "openssl", else the default build's.
BINARIES=${MCS_BENCH_BINARIES:-}
KEEP=${MCS_BENCH_KEEP:-0}                         # 1: keep the work directory for inspection
# Spec versions requested: the realistic fixture as a current Ignition asks (3.4.0); the
# synthetic one at every servable version, so that many distinct 4 MB payloads are cached.
REALISTIC_VERSIONS=${MCS_BENCH_REALISTIC_VERSIONS:-3.4.0}
SYNTHETIC_VERSIONS=${MCS_BENCH_SYNTHETIC_VERSIONS:-2.2.0,3.0.0,3.1.0,3.2.0,3.3.0,3.4.0,3.5.0}
CLUSTER_POOLS=${MCS_BENCH_CLUSTER_POOLS:-20}       # synthetic 4 MB pools served in cluster mode
CLUSTER_VERSIONS=${MCS_BENCH_CLUSTER_VERSIONS:-3.4.0}
FIXTURES=${MCS_BENCH_FIXTURES:-realistic,synthetic,cluster} # which fixtures to run
USER_AGENT='Ignition/2.20.0'

# Targets from issue 8; issue 28: the OpenSSL build at least as fast as nginx; issue 34: cluster
# mode (repeated fetches, an answer already durable) as fast as nginx for both builds; issue 42:
# the new-address row too, and cluster mode's peak RSS.
TARGET_THROUGHPUT_RATIO=0.8
TARGET_OPENSSL_THROUGHPUT_RATIO=1.0
TARGET_P99_RATIO=1.5
TARGET_CLUSTER_THROUGHPUT_RATIO=1.0
TARGET_CLUSTER_P99_RATIO=1.0
# Issue 58: one connection per request (every booting machine is a new TLS connection): the
# default build at least 1.1x nginx, the OpenSSL build at least 1.0x, p99 at most nginx's.
TARGET_CLOSE_THROUGHPUT_RATIO=1.1
TARGET_OPENSSL_CLOSE_THROUGHPUT_RATIO=1.0
# The p99 is a machine's: its whole connection (TCP connect, TLS handshake, request, answer), as
# loadgen times it. wrk starts its clock after the handshake, so its close p99 keeps the general
# target: a server that takes new connections later (accepting only when idle) lowers wrk's p99
# while machines wait longer in the handshake (benches/README.md, "The per-connection row").
TARGET_CLOSE_P99_RATIO=1.0
TARGET_RSS_REALISTIC_MB=64
TARGET_RSS_SYNTHETIC_MB=256
# Issue 42: 20 pools of 4 MB in cluster mode (81 MiB of bodies) in at most this, both builds.
TARGET_RSS_CLUSTER_MB=128
TARGET_COLD_MS=20
# Cluster mode at rest after the load (a closed channel once made the snapshot builder spin).
TARGET_REST_CPU_PERCENT=2
REST_SECONDS=${MCS_BENCH_REST_SECONDS:-5}

die() { echo "benches/run.sh: $*" >&2; exit 1; }

missing=()
for tool in nginx wrk curl openssl python3 cargo sha256sum; do
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

accept_for() { echo "application/vnd.coreos.ignition+json;version=$1, */*;q=0.1"; }

# fetch VERSION [curl args] URL: curl as Ignition asking for spec VERSION would call us.
fetch() {
    local version=$1
    shift
    curl --silent --show-error --insecure --max-time 30 -H "Accept: $(accept_for "$version")" \
        -H "User-Agent: $USER_AGENT" -H 'Accept-Encoding: identity' "$@"
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

# Served-record writes of our server so far (cluster mode; ADDRESS is its metrics listener).
record_writes() {
    curl -s --max-time 5 "http://$1/metrics" |
        awk '/^mcs_mcn_bootstrap_records_total[{]/ && /event="published"/ { s += $NF } END { printf "%d", s }'
}

# The rendered MachineConfig file a bootstrap pool points at.
mc_file() {
    local dir=$1 pool=$2 name
    if [[ $(head -c 1 "$dir/machine-pools/$pool.yaml") == "{" ]]; then
        # JSON (the project's generated fixtures).
        name=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"]["configuration"]["name"])' \
            "$dir/machine-pools/$pool.yaml")
    else
        name=$(awk '/^status:/ { s = 1 } s && /^    name:/ { print $2; exit }' "$dir/machine-pools/$pool.yaml")
    fi
    echo "$dir/machine-configs/$name.yaml"
}

# start_ours NAME MODE DIR BUILD -> sets OURS_PID[BUILD], OURS_PORT[BUILD]. MODE bootstrap serves
# DIR as the base directory; MODE cluster runs `start` against the fake API server described by
# DIR/cluster.env, as replica `mcs-bench-BUILD` (both builds run side by side, as two replicas
# with their own served records), with its metrics on OURS_METRICS[BUILD].
declare -A OURS_PID OURS_PORT OURS_METRICS SERVER_BIN
start_ours() {
    local name=$1 mode=$2 dir=$3 build=$4 args=() port pid metrics=""
    if [[ $mode == bootstrap ]]; then
        args=(bootstrap --server-basedir "$dir" --bootstrap-kubeconfig "$dir/kubeconfig")
    else
        local KUBECONFIG TOKEN_DIR
        # shellcheck source=/dev/null
        source "$dir/cluster.env"
        args=(start --kubeconfig "$KUBECONFIG" --bootstrap-token-dir "$TOKEN_DIR"
            --apiserver-url https://api-int.example.com:6443)
        metrics=127.0.0.1:$(free_port)
    fi
    port=$(free_port)
    NODE_NAME=mcs-bench-$build "${SERVER_BIN[$build]}" "${args[@]}" \
        --cert "$CERT" --key "$KEY" --secure-port "$port" --insecure-port 0 \
        --bind-address 127.0.0.1 --metrics-bind-address "$metrics" \
        >"$WORK/ours-$name-$build.log" 2>&1 &
    pid=$!
    OURS_METRICS[$build]=$metrics
    STARTED+=("$pid")
    OURS_PID[$build]=$pid
    OURS_PORT[$build]=$port
    wait_ready "https://127.0.0.1:$port/healthz" "$pid" "$WORK/ours-$name-$build.log"
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
    map \$http_accept \$spec {
        default none;
        "~version=(?<v>[0-9]+\\.[0-9]+\\.[0-9]+)" \$v;
    }
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
        # One directory per requested spec version, as our server negotiates it from Accept.
        root $root/\$spec;
        location = /healthz { return 200; }
    }
}
EOF
    nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log" >"$prefix/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    STARTED+=("$NGINX_PID")
    wait_ready "https://127.0.0.1:$NGINX_PORT/healthz" "$NGINX_PID" "$prefix/logs/error.log"
}

nginx_pids() { echo "$1" $(pgrep -P "$1" || true); }

nginx_peak_rss_kb() { # sum over the master and its workers
    local total=0 pid
    for pid in $(nginx_pids "$1"); do
        total=$((total + $(peak_rss_kb "$pid")))
    done
    echo "$total"
}

# CPU time (user + system, clock ticks) used so far by the given processes, all threads.
cpu_ticks() {
    local pid total=0
    for pid in "$@"; do
        total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
    done
    echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)

# run_load LABEL GENERATOR SCENARIO TARGETS PORT: one bounded run of the load generator against
# https://127.0.0.1:PORT. Every round appends its RESULT line to the same file.
# - wrk (one client address, 127.0.0.1): each connection rotates over TARGETS (PATH@VERSION ...);
#   SCENARIO keepalive or close (`Connection: close`).
# - loadgen (benches/loadgen.rs, a source address of its own for each client): keepalive and
#   close, every client from its own loopback address asking for its own target again (one
#   uncounted warm-up request each: its address's first answer); newaddr, every request on a new
#   connection from an address never used before in this run of the script (LOADGEN_BLOCK: a
#   /16 of 127.0.0.0/8 per run).
LOADGEN_BLOCK=16
# wrk's OpenSSL offers TLS 1.3 suites in OpenSSL's order (AES-256-GCM first) and both servers
# take the client's order; Ignition (Go's crypto/tls, on CPUs with AES) offers AES-128-GCM
# first, as loadgen does. This configuration makes wrk's ClientHello offer Ignition's order, so
# nginx and our server encrypt with the suite a machine gets.
cat >"$WORK/wrk-openssl.cnf" <<'EOF'
openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
EOF
run_load() {
    local label=$1 generator=$2 scenario=$3 targets=$4 port=$5 out
    out="$WORK/load-$label.txt"
    if [[ $generator == wrk ]]; then
        local extra=()
        [[ $scenario == close ]] && extra=(-H 'Connection: close')
        MCS_BENCH_TARGETS=$targets OPENSSL_CONF="$WORK/wrk-openssl.cnf" timeout $((DURATION + 60)) \
            wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" --timeout 10s --latency \
            -s "$REPO/benches/wrk/report.lua" \
            -H "User-Agent: $USER_AGENT" -H 'Accept-Encoding: identity' \
            "${extra[@]}" "https://127.0.0.1:$port" >"$out.last" 2>&1 ||
            die "wrk $label failed: $(tail -n 5 "$out.last")"
    else
        local mode=()
        case $scenario in
            keepalive) mode=(--source per-client --warmup 1) ;;
            close) mode=(--source per-client --connection close --warmup 1) ;;
            newaddr)
                ((LOADGEN_BLOCK < 255)) || die "loadgen: no /16 of 127.0.0.0/8 left for new addresses"
                mode=(--source per-request --first-address "127.$LOADGEN_BLOCK.0.1")
                LOADGEN_BLOCK=$((LOADGEN_BLOCK + 1))
                ;;
        esac
        timeout $((DURATION + 60)) "$LOADGEN" --connect "127.0.0.1:$port" --targets "$targets" \
            --clients "$CONNECTIONS" --threads "$THREADS" --duration "$DURATION" --timeout 10 \
            --ca "$CA" "${mode[@]}" >"$out.last" 2>&1 ||
            die "loadgen $label failed: $(tail -n 5 "$out.last")"
        # One /16 per run: more new addresses would reach into the next run's.
        awk '/^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "addresses" && kv[2] > 65000) exit 1 } }' \
            "$out.last" || die "loadgen $label used more than 65000 new addresses (shorten MCS_BENCH_DURATION)"
    fi
    grep '^RESULT ' "$out.last" >>"$out" || die "$generator $label printed no result: $(tail -n 5 "$out.last")"
    cat "$out.last" >>"$out.log"
}

# Aggregates over the rounds of a label's RESULT lines.
results() { # LABEL AWK-PROGRAM over fields f["name"]
    awk -v prog="$2" '
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] += kv[2] } n++ }
        END {
            if (prog == "rps") printf "%.0f", f["requests"] * 1e6 / f["duration_us"]
            if (prog == "p99") printf "%.0f", f["p99_us"] / n
            if (prog == "errors") printf "%d", f["connect_errors"] + f["read_errors"] + f["write_errors"] + f["status_errors"] + f["timeouts"] + f["body_errors"]
            # the phases of loadgen, p50/p99 in ms averaged over the rounds
            if (prog == "phases") for (k = 1; k <= 3; k++) {
                p = (k == 1 ? "connect" : k == 2 ? "head" : "body")
                printf "%s%s %.1f/%.1f", (k > 1 ? ", " : ""), p, f[p "_p50_us"] / n / 1000, f[p "_p99_us"] / n / 1000
            }
        }' "$WORK/load-$1.txt"
}
rps() { results "$1" rps; }
# ratio_stats KIND(rps|p99) A B: the ratio A/B of each round (A's and B's RESULT lines of the same
# round), as "median min max" over the rounds; the rounds of a scenario run A and B close
# together, so a round's ratio carries little of the machine's drift, and the median little of
# one bad round.
ratio_stats() {
    awk -v kind="$1" '
        FNR == 1 { file++ }
        {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            v = (kind == "rps") ? (f["duration_us"] > 0 ? f["requests"] * 1e6 / f["duration_us"] : 0) : f["p99_us"]
            if (file == 1) a[FNR] = v; else b[FNR] = v
            n[file] = FNR
        }
        END {
            m = (n[1] < n[2]) ? n[1] : n[2]; k = 0
            for (i = 1; i <= m; i++) if (b[i] > 0) r[++k] = a[i] / b[i]
            if (k == 0) { printf "0 0 0"; exit }
            for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
            med = (k % 2) ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2
            printf "%.2f %.2f %.2f", med, r[1], r[k]
        }' "$WORK/load-$2.txt" "$WORK/load-$3.txt"
}
# Server CPU milliseconds per request over all rounds of a label.
cpu_ms_per_request() {
    local ticks requests
    ticks=$(awk '{ t += $1 } END { print t }' "$WORK/cpu-$1.txt")
    requests=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "requests") r += kv[2] } } END { print r }' "$WORK/load-$1.txt")
    awk -v t="$ticks" -v r="$requests" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", (r > 0 ? t * 1000 / hz / r : 0) }'
}
p99_ms() { awk -v v="$(results "$1" p99)" 'BEGIN { printf "%.2f ms", v / 1000 }'; }
# Where a label's request time went (loadgen's phases), p50/p99 in ms averaged over its rounds.
phases() { results "$1" phases; }

ROWS=()
NOTES=()
FAILED_ROWS=()
# row SCENARIO OURS NGINX RATIO TARGET VERDICT [NOTE]
# A row whose verdict is FAIL fails the run (after every row is printed).
row() {
    ROWS+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' "$1" "$2" "$3" "$4" "$5" "$6" "${7:-}")")
    [[ $6 == FAIL ]] && FAILED_ROWS+=("$1")
    return 0
}

# compare SCENARIO KIND(rps|p99) OURS_LABEL NGINX_LABEL [RATIO_TARGET [NOTE]]: the ratio target is
# a minimum for throughput (default TARGET_THROUGHPUT_RATIO), a maximum for p99 (default
# TARGET_P99_RATIO), or "info".
compare() {
    local scenario=$1 kind=$2 a=$3 b=$4 limit=${5:-} ours theirs ratio verdict target note=${6:-} stats median low high
    stats=$(ratio_stats "$kind" "$a" "$b")
    read -r median low high <<<"$stats"
    # The median of the rounds' ratios decides; the spread says how far one round may stray.
    ratio="$median ($low-$high)"
    if [[ $kind == rps ]]; then
        limit=${limit:-$TARGET_THROUGHPUT_RATIO}
        ours=$(rps "$a"); theirs=$(rps "$b")
        target=">= $limit"
        verdict=$(awk -v r="$median" -v t="$limit" 'BEGIN { print (r >= t ? "pass" : "FAIL") }')
        ours="$ours req/s"; theirs="$theirs req/s"
    else
        limit=${limit:-$TARGET_P99_RATIO}
        ours=$(results "$a" p99); theirs=$(results "$b" p99)
        target="<= $limit"
        verdict=$(awk -v r="$median" -v t="$limit" 'BEGIN { print (r <= t ? "pass" : "FAIL") }')
        ours=$(awk -v v="$ours" 'BEGIN { printf "%.2f ms", v / 1000 }')
        theirs=$(awk -v v="$theirs" 'BEGIN { printf "%.2f ms", v / 1000 }')
    fi
    if [[ $limit == info ]]; then
        target=info verdict=-
    fi
    local errors_ours errors_nginx
    errors_ours=$(results "$a" errors); errors_nginx=$(results "$b" errors)
    if ((errors_ours > 0 || errors_nginx > 0)); then
        note="errors: ours $errors_ours, nginx $errors_nginx (see the generator's output)${note:+; $note}"
        ((errors_ours > 0)) && verdict=FAIL
        ((errors_nginx > 0)) && verdict=INVALID
    fi
    row "$scenario" "$ours" "$theirs" "$ratio" "$target" "$verdict" "$note"
}

# Fetch what our server returns for each target once; nginx serves exactly those bytes, at
# <www>/<version>/config/<pool>. Without our server (SERVERS=nginx) it serves the MachineConfig
# files themselves.
prepare_www() { # DIR TARGETS WWW
    local dir=$1 targets=$2 www=$3 target path version code
    for target in $targets; do
        path=${target%@*} version=${target#*@}
        mkdir -p "$www/$version/config"
        if ((run_ours)); then
            # Cluster mode answers 503 until its caches have synced.
            for _ in $(seq 600); do
                code=$(fetch "$version" -o "$www/$version$path" -w '%{http_code}' "https://127.0.0.1:${OURS_PORT[$FIRST_BUILD]}$path")
                [[ $code == 503 ]] || break
                sleep 0.1
            done
            [[ $code == 200 ]] || die "our server answered $code for $path at spec $version"
        else
            cp "$(mc_file "$dir" "${path##*/}")" "$www/$version$path"
        fi
    done
    chmod -R a+rX "$www"
}

verify_same_bytes() { # TARGETS WWW: nginx and each of our builds serve the same bytes
    local target path version build
    for target in $1; do
        path=${target%@*} version=${target#*@}
        fetch "$version" -o "$WORK/nginx-check" "https://127.0.0.1:$NGINX_PORT$path"
        cmp -s "$WORK/nginx-check" "$2/$version$path" ||
            die "nginx does not serve the same bytes for $path at spec $version"
        ((run_ours)) || continue
        for build in "${BUILD_LIST[@]}"; do
            fetch "$version" -o "$WORK/ours-check" "https://127.0.0.1:${OURS_PORT[$build]}$path"
            cmp -s "$WORK/ours-check" "$2/$version$path" ||
                die "the $build build does not serve the same bytes for $path at spec $version"
        done
    done
    # wrk's ClientHello (its OpenSSL configuration above) gets every server Ignition's suite.
    local port suite
    for port in "$NGINX_PORT" $( ((run_ours)) && for build in "${BUILD_LIST[@]}"; do echo "${OURS_PORT[$build]}"; done); do
        suite=$(OPENSSL_CONF="$WORK/wrk-openssl.cnf" timeout 10 openssl s_client -connect "127.0.0.1:$port" \
            </dev/null 2>/dev/null | sed -n 's/^New, TLSv1.3, Cipher is //p')
        [[ $suite == TLS_AES_128_GCM_SHA256 ]] ||
            die "a client offering Ignition's TLS 1.3 suites got '$suite' from 127.0.0.1:$port, not TLS_AES_128_GCM_SHA256"
    done
}

# cold_render DIR POOL VERSION PORT: rewrite the pool's MachineConfig (a real change: an
# annotation), then time the first request to PORT that returns the new body. Prints "median max"
# in ms.
cold_render() {
    local dir=$1 pool=$2 version=$3 port=$4 mc before timing code i samples=()
    mc=$(mc_file "$dir" "$pool")
    for i in $(seq "$COLD_SAMPLES"); do
        before=$(fetch "$version" "https://127.0.0.1:$port/config/$pool" | sha256sum)
        # Block YAML (`release-image-version: ""`) or JSON (`"release-image-version": "..."`).
        sed -i -E "s/release-image-version(\"?): \"[^\"]*\"/release-image-version\1: \"bench-cold-$i-$$\"/" "$mc"
        timing=""
        for _ in $(seq 1000); do
            read -r code timing < <(fetch "$version" -o "$WORK/cold-body" -w '%{http_code} %{time_total}\n' \
                "https://127.0.0.1:$port/config/$pool")
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

# bench_fixture NAME MODE DIR POOLS VERSIONS RSS_TARGET_MB GENERATOR(wrk|loadgen|wrk+loadgen)
# wrk+loadgen: wrk's keep-alive and close scenarios, then `machine`: loadgen with a connection per
# request, each timed whole as a booting machine sees it (the per-connection row's p99).
bench_fixture() {
    local name=$1 mode=$2 dir=$3 pools=$4 versions=$5 rss_target=$6 generator=$7 www="$WORK/www-$1" targets="" pool version
    local scenarios=(keepalive close)
    [[ $generator == loadgen ]] && scenarios+=(newaddr)
    [[ $generator == wrk+loadgen ]] && scenarios+=(machine)
    for pool in ${pools//,/ }; do
        for version in ${versions//,/ }; do targets+="/config/$pool@$version "; done
    done
    local build
    if ((run_ours)); then
        for build in "${BUILD_LIST[@]}"; do start_ours "$name" "$mode" "$dir" "$build"; done
    fi
    prepare_www "$dir" "$targets" "$www"
    start_nginx "$name" "$www"
    verify_same_bytes "$targets" "$www"
    local distinct total
    distinct=$(find "$www" -type f -exec sha256sum {} + | awk '{ print $1 }' | sort -u | wc -l)
    total=$(find "$www" -type f -printf '%s\n' | awk '{ t += $1 } END { printf "%.1f", t / 1048576 }')
    echo "== $name: pools $pools at specs $versions: $distinct distinct bodies, $total MiB in all;" \
        "${DURATION}s per run, $CONNECTIONS connections ($generator)" >&2
    NOTES+=("$name: pools $pools, specs $versions: $distinct distinct bodies, $total MiB in all; load from $generator")

    # Rounds rotate the order (nginx, aws-lc, openssl, then aws-lc, openssl, nginx, ...) so that load
    # from elsewhere on a shared machine drifts into every side alike.
    local scenario label round labels=(nginx) order i
    ((run_ours)) && labels+=("${BUILD_LIST[@]}")
    for scenario in "${scenarios[@]}"; do
        for round in $(seq "$ROUNDS"); do
            order=()
            for i in "${!labels[@]}"; do
                order+=("${labels[$(((i + round - 1) % ${#labels[@]}))]}")
            done
            for label in "${order[@]}"; do
                local port=$NGINX_PORT pids before
                pids=$(nginx_pids "$NGINX_PID")
                if [[ $label != nginx ]]; then port=${OURS_PORT[$label]}; pids=${OURS_PID[$label]}; fi
                local load=$generator load_scenario=$scenario
                case $generator-$scenario in
                    wrk+loadgen-machine) load=loadgen load_scenario=close ;;
                    wrk+loadgen-*) load=wrk ;;
                esac
                echo "   round $round: $load $scenario against $label" >&2
                before=$(cpu_ticks $pids)
                local writes_before=""
                [[ $label != nginx && -n ${OURS_METRICS[$label]:-} ]] && writes_before=$(record_writes "${OURS_METRICS[$label]}")
                run_load "$name-$scenario-$label" "$load" "$load_scenario" "$targets" "$port"
                echo "$(($(cpu_ticks $pids) - before))" >>"$WORK/cpu-$name-$scenario-$label.txt"
                if [[ -n $writes_before ]]; then
                    echo "$(($(record_writes "${OURS_METRICS[$label]}") - writes_before))" >>"$WORK/writes-$name-$scenario-$label.txt"
                fi
            done
        done
    done

    if ((run_ours)); then
        local s o n b min_ratio max_p99 rss nginx_rss cold note=""
        # The loadgen rows say who asks; wrk's clients are one address.
        [[ $generator == loadgen ]] &&
            note="$CONNECTIONS clients, each from its own address, asking for its own pool again"
        for b in "${BUILD_LIST[@]}"; do
            min_ratio=$TARGET_THROUGHPUT_RATIO max_p99=$TARGET_P99_RATIO
            close_ratio=$TARGET_CLOSE_THROUGHPUT_RATIO close_p99=$TARGET_CLOSE_P99_RATIO
            if [[ $b == *openssl* ]]; then
                min_ratio=$TARGET_OPENSSL_THROUGHPUT_RATIO close_ratio=$TARGET_OPENSSL_CLOSE_THROUGHPUT_RATIO
            fi
            if [[ $mode == cluster ]]; then
                min_ratio=$TARGET_CLUSTER_THROUGHPUT_RATIO max_p99=$TARGET_CLUSTER_P99_RATIO
                close_ratio=$TARGET_CLUSTER_THROUGHPUT_RATIO close_p99=$TARGET_CLUSTER_P99_RATIO
            fi
            compare "$name [$b]: keep-alive throughput" rps "$name-keepalive-$b" "$name-keepalive-nginx" "$min_ratio" "$note"
            compare "$name [$b]: Connection: close throughput" rps "$name-close-$b" "$name-close-nginx" "$close_ratio" "$note"
            compare "$name [$b]: p99 latency, keep-alive" p99 "$name-keepalive-$b" "$name-keepalive-nginx" "$max_p99" "$note"
            if [[ $generator == wrk+loadgen ]]; then
                compare "$name [$b]: p99 latency, Connection: close" p99 "$name-close-$b" "$name-close-nginx" "$max_p99" \
                    "wrk: from the request to the answer's end (after the TCP connect and TLS handshake)"
                compare "$name [$b]: a machine's connection, throughput" rps "$name-machine-$b" "$name-machine-nginx" "$close_ratio" \
                    "loadgen: a connection per request, Ignition's suites, the certificate checked"
                compare "$name [$b]: a machine's connection, p99 latency" p99 "$name-machine-$b" "$name-machine-nginx" "$close_p99" \
                    "the whole connection: TCP connect, TLS handshake, request, the answer's last byte"
            else
                compare "$name [$b]: p99 latency, Connection: close" p99 "$name-close-$b" "$name-close-nginx" "$close_p99" "$note"
            fi
            if [[ $generator == loadgen ]]; then
                compare "$name [$b]: new address every request, throughput" rps "$name-newaddr-$b" "$name-newaddr-nginx" "$min_ratio" \
                    "$CONNECTIONS clients; a new connection from a new address each request (a new served record each)"
                compare "$name [$b]: new address every request, p99 latency" p99 "$name-newaddr-$b" "$name-newaddr-nginx" "$max_p99" \
                    "whole request incl. TCP connect and TLS handshake; ours waits for its record to be durable"
                if [[ -s $WORK/writes-$name-newaddr-$b.txt ]]; then
                    local writes answers
                    writes=$(awk '{ w += $1 } END { print w }' "$WORK/writes-$name-newaddr-$b.txt")
                    answers=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "requests") r += kv[2] } } END { print r }' "$WORK/load-$name-newaddr-$b.txt")
                    row "$name [$b]: new address every request, record writes per answer" \
                        "$(awk -v w="$writes" -v a="$answers" 'BEGIN { printf "%.4f", (a > 0 ? w / a : 0) }')" "-" "-" "info" "-" \
                        "$writes served-record writes for $answers answers (each answer a new record; one write carries a batch)"
                fi
            fi
            if [[ -n ${OURS_METRICS[$b]:-} ]]; then
                local early
                early=$(curl -s --max-time 5 "http://${OURS_METRICS[$b]}/metrics" |
                    awk '/^mcs_mcn_records_served_before_durable_total / { print $2 }')
                row "$name [$b]: answers sent before their record was durable" "${early:-unknown}" "-" "-" "0" \
                    "$([[ $early == 0 ]] && echo pass || echo FAIL)" \
                    "mcs_mcn_records_served_before_durable_total after every scenario (the 2 s bound reached)"
            fi
            for s in "${scenarios[@]}"; do
                o=$(cpu_ms_per_request "$name-$s-$b"); n=$(cpu_ms_per_request "$name-$s-nginx")
                row "$name [$b]: server CPU per request, $s" "$o ms" "$n ms" \
                    "$(awk -v o="$o" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? o / n : 0) }')" "info" "-" \
                    "user+system time of the server processes / requests"
                if [[ $generator == loadgen || $s == machine ]]; then
                    row "$name [$b]: where a request's time went, $s" "$(phases "$name-$s-$b")" "$(phases "$name-$s-nginx")" "-" "info" "-" \
                        "p50/p99 ms of each phase: TCP connect and TLS handshake, request to response head, rest of the body"
                fi
            done
            if [[ $mode == cluster ]]; then
                # At rest after the load: a server with nothing to do spends (nearly) nothing.
                local rest_ticks rest_percent
                rest_ticks=$(cpu_ticks "${OURS_PID[$b]}")
                sleep "$REST_SECONDS"
                rest_percent=$(awk -v t="$(($(cpu_ticks "${OURS_PID[$b]}") - rest_ticks))" -v hz="$CLK_TCK" -v s="$REST_SECONDS" \
                    'BEGIN { printf "%.1f", t * 100 / hz / s }')
                row "$name [$b]: server CPU at rest after the load" "$rest_percent% of a core" "-" "-" "< $TARGET_REST_CPU_PERCENT%" \
                    "$(awk -v p="$rest_percent" -v t="$TARGET_REST_CPU_PERCENT" 'BEGIN { print (p < t ? "pass" : "FAIL") }')" \
                    "user+system time over ${REST_SECONDS}s without requests (watches, token poll, housekeeping)"
            fi
            rss=$(peak_rss_kb "${OURS_PID[$b]}")
            nginx_rss=$(nginx_peak_rss_kb "$NGINX_PID")
            row "$name [$b]: peak RSS under load" "$((rss / 1024)) MB" "$((nginx_rss / 1024)) MB" "-" \
                "< $rss_target MB" "$( ((rss < rss_target * 1024)) && echo pass || echo FAIL)" "VmHWM; nginx: master + workers"
        done
        # Each build against the first, from the same rounds (e.g. OpenSSL over AWS-LC).
        local first=${BUILD_LIST[0]} other
        for other in "${BUILD_LIST[@]:1}"; do
            for s in keepalive close; do
                read -r median low high <<<"$(ratio_stats rps "$name-$s-$other" "$name-$s-$first")"
                row "$name: $other/$first throughput, $s" "$(rps "$name-$s-$other") req/s" "-" \
                    "$median ($low-$high)" "info" "-" "ratio: the $other build over the $first build ($(rps "$name-$s-$first") req/s)"
            done
        done
        # Cold renders edit a MachineConfig file: bootstrap mode only.
        if [[ $mode == bootstrap ]]; then
            for b in "${BUILD_LIST[@]}"; do
                echo "   cold renders ($b)" >&2
                cold=$(cold_render "$dir" "${pools%%,*}" "${versions%%,*}" "${OURS_PORT[$b]}")
                local cold_target="info" cold_verdict="-"
                if [[ $name == realistic ]]; then
                    cold_target="< $TARGET_COLD_MS ms"
                    cold_verdict=$(awk -v m="${cold% *}" -v t="$TARGET_COLD_MS" 'BEGIN { print (m < t ? "pass" : "FAIL") }')
                fi
                row "$name [$b]: first request after a change" "${cold% *} ms" "-" "-" "$cold_target" "$cold_verdict" \
                    "median of $COLD_SAMPLES, max ${cold#* } ms, whole request incl. TLS handshake"
            done
        fi
        for b in "${BUILD_LIST[@]}"; do stop_pid "${OURS_PID[$b]}"; done
    else
        local s
        for s in "${scenarios[@]}"; do
            row "$name: $s throughput (nginx only)" "-" "$(rps "$name-$s-nginx") req/s" "-" "-" "-"
            row "$name: $s p99 (nginx only)" "-" "$(p99_ms "$name-$s-nginx")" "-" "-" "-"
        done
    fi
    stop_pid "$NGINX_PID"
}

IFS=, read -r -a BUILD_LIST <<<"$BUILDS"
if ((run_ours)); then
    if [[ -n ${MCS_BENCH_SERVER_BIN:-} ]]; then
        # Another build (e.g. a "before" binary) under the same harness, labelled "custom".
        BUILD_LIST=(custom)
        SERVER_BIN[custom]=$MCS_BENCH_SERVER_BIN
    fi
    if [[ -n $BINARIES ]]; then
        BUILD_LIST=()
        IFS=, read -r -a pairs <<<"$BINARIES"
        for pair in "${pairs[@]}"; do
            label=${pair%%=*} path=${pair#*=}
            [[ -x $path && $label != "$pair" ]] || die "MCS_BENCH_BINARIES: $pair is not LABEL=EXECUTABLE"
            BUILD_LIST+=("$label")
            SERVER_BIN[$label]=$path
        done
    fi
    # Where cargo puts the binaries (CARGO_TARGET_DIR or the build config may move it).
    TARGET_DIR=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    for build in "${BUILD_LIST[@]}"; do
        [[ -n ${SERVER_BIN[$build]:-} ]] && continue
        case $build in
            aws-lc) features=() ;;
            openssl) features=(--no-default-features --features openssl) ;;
            *) die "unknown build $build in MCS_BENCH_BUILDS (aws-lc, openssl)" ;;
        esac
        echo "building machine-config-server, $build build (release)" >&2
        (cd "$REPO" && cargo build --release --quiet "${features[@]}" --bin machine-config-server)
        # Both builds land at the same path: keep each one's binary.
        cp "$TARGET_DIR/release/machine-config-server" "$WORK/machine-config-server-$build"
        SERVER_BIN[$build]=$WORK/machine-config-server-$build
    done
    if [[ -n ${SERVER_BIN[openssl]:-} && -z $BINARIES ]]; then
        # Not `grep -q`: it may exit before ldd has written everything, and under pipefail
        # ldd's SIGPIPE would fail the check.
        ldd "${SERVER_BIN[openssl]}" | grep 'libcrypto\.so\.3 => /' >/dev/null ||
            die "the OpenSSL build does not link libcrypto.so.3"
    fi
fi
# bench_executable NAME: builds benches/NAME.rs (release) and prints the executable's path.
bench_executable() {
    (cd "$REPO" && cargo build --release --quiet --bench "$1" --message-format=json) |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}
if ((run_ours)) && [[ ,$FIXTURES, == *,cluster,* ]]; then
    echo "building benches/fake_cluster.rs (release)" >&2
    FAKE_CLUSTER=$(bench_executable fake_cluster)
    [[ -x $FAKE_CLUSTER ]] || die "could not build benches/fake_cluster.rs"
fi
# The cluster fixture's load and the realistic fixture's machine scenario.
if [[ ,$FIXTURES, == *,cluster,* || ,$FIXTURES, == *,realistic,* ]]; then
    echo "building benches/loadgen.rs (release)" >&2
    LOADGEN=$(bench_executable loadgen)
    [[ -x $LOADGEN ]] || die "could not build benches/loadgen.rs"
fi

FIRST_BUILD=${BUILD_LIST[0]}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_BEFORE%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    echo "warning: load average $LOAD_BEFORE on $(nproc) cores: other work will skew the results" >&2
fi

# The realistic fixture, copied so the cold-render step may edit it.
if [[ ,$FIXTURES, == *,realistic,* ]]; then
    cp -r "$FIXTURE" "$WORK/realistic"
    chmod -R u+w "$WORK/realistic"
    bench_fixture realistic bootstrap "$WORK/realistic" master "$REALISTIC_VERSIONS" "$TARGET_RSS_REALISTIC_MB" wrk+loadgen
fi

# Synthetic multi-megabyte configs: bootstrap mode serves the master and arbiter pools.
if [[ ,$FIXTURES, == *,synthetic,* ]]; then
    python3 "$REPO/benches/gen_bootstrap.py" "$WORK/synthetic" --template "$FIXTURE" \
        --pools master,arbiter --config-bytes "$SYNTHETIC_BYTES"
    bench_fixture synthetic bootstrap "$WORK/synthetic" master,arbiter "$SYNTHETIC_VERSIONS" "$TARGET_RSS_SYNTHETIC_MB" wrk
fi

# Many synthetic pools in one process: cluster mode (`start`) against the tests' fake API
# server (benches/fake_cluster.rs) holding CLUSTER_POOLS generated 4 MB pools. Load from
# benches/loadgen.rs: our server keeps a served record per client address, and what an answer
# costs depends on whether that address's record is new (see benches/README.md).
if ((run_ours)) && [[ ,$FIXTURES, == *,cluster,* ]]; then
    pools=$(seq -s, -f 'pool%02g' 1 "$CLUSTER_POOLS")
    python3 "$REPO/benches/gen_bootstrap.py" "$WORK/cluster" --template "$FIXTURE" \
        --pools "$pools" --config-bytes "$SYNTHETIC_BYTES"
    "$FAKE_CLUSTER" "$WORK/cluster" >"$WORK/cluster/cluster.env" 2>"$WORK/fake-cluster.log" &
    FAKE_PID=$!
    STARTED+=("$FAKE_PID")
    for _ in $(seq 600); do
        grep -q '^TOKEN_DIR=' "$WORK/cluster/cluster.env" 2>/dev/null && break
        kill -0 "$FAKE_PID" 2>/dev/null || die "fake API server exited: $(tail -n 5 "$WORK/fake-cluster.log")"
        sleep 0.1
    done
    grep -q '^TOKEN_DIR=' "$WORK/cluster/cluster.env" || die "fake API server did not start"
    bench_fixture cluster cluster "$WORK/cluster" "$pools" "$CLUSTER_VERSIONS" "$TARGET_RSS_CLUSTER_MB" loadgen
    stop_pid "$FAKE_PID"
fi

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$REPO/benches/results"
RESULTS="$REPO/benches/results/$(date -u +%Y%m%dT%H%M%SZ).txt"
{
    echo "machine-config-server ($(printf '%s build, ' "${BUILD_LIST[@]}")$(openssl version | cut -d' ' -f1-2)) vs nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), $(date -u +%Y-%m-%dT%H:%MZ)," \
        "$(nproc) cores, wrk or loadgen -t$THREADS -c$CONNECTIONS, $ROUNDS x ${DURATION}s per server and scenario"
    echo "load average before: $LOAD_BEFORE, after: $LOAD_AFTER (other work on the machine skews every number)"
    printf '%s\n' "${NOTES[@]}"
    {
        printf 'scenario\tours\tnginx\tratio\ttarget\tresult\tnote\n'
        printf '%s\n' "${ROWS[@]}"
    } | column -t -s $'\t'
} | tee "$RESULTS"
echo "saved to ${RESULTS#"$REPO"/}" >&2
if ((${#FAILED_ROWS[@]})); then
    echo "benches/run.sh: ${#FAILED_ROWS[@]} row(s) below target:" >&2
    printf '  %s\n' "${FAILED_ROWS[@]}" >&2
    exit 1
fi
