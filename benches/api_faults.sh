#!/usr/bin/env bash
# The API fault matrix at full length: writes docs/api-faults.md (the figures and how they were
# measured). One command:
#
#   benches/api_faults.sh                 # on the in-test API server
#   KUBEBUILDER_ASSETS=/path/to/bin MCS_UPSTREAM_ASSETS=/path/to/assets benches/api_faults.sh
#                                         # on a real kube-apiserver (docs/testing.md)
#
# It runs the ignored test `api_faults_full` of tests/api_faults.rs (three replicas, each
# behind a fault proxy; every fault of the matrix in turn: 20 s each, the blackhole 60 s; about
# 7 minutes on 2 cores) and fails, leaving the document unchanged, when a row breaks a bound.
# The clock row needs libfaketime (Debian package `libfaketime`, which .ci/run installs).
# MCS_FAULT_ROWS=Blackhole,Gone runs only the named rows (its section of the document then has only those; a run on a real
# kube-apiserver writes its own section and keeps the other).
set -euo pipefail
cd "$(dirname "$0")/.."

table=$(mktemp)
header=$(mktemp)
trap 'rm -f "$table" "$header"' EXIT
MCS_FAULT_TABLE="$table" cargo test --locked --test api_faults -- --ignored --exact api_faults_full --nocapture

out=docs/api-faults.md
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then section=real; else section=in-test; fi
cat > "$header" <<'EOF'
# What each Kubernetes API fault costs

Written by `benches/api_faults.sh` (do not edit by hand); the test is `tests/api_faults.rs`.

Three `machine-config-server start` replicas run behind a round-robin load balancer that keeps
the client's address (`tests/support/balancer.rs`); each talks to the API server through
its own fault proxy (`tests/support/fault_proxy.rs`). For each fault, on a fresh cluster:
machines fetch `/config/worker` through the balancer, four a second, each from its own
address, before, during and for 10 s after the fault, and a prober asks each replica directly
every 200 ms (both count as config requests). One second into the fault the worker pool moves
to a new rendered config (through the test's own connection to the API server) and the Nodes
of the machines served before the fault join; the others join after it. Every fault hits all
three replicas' paths to the API, except the clock row, which restarts one replica with its
wall clock 10 minutes ahead (libfaketime) and restarts it normally when the fault ends (out of
the balancer's rotation meanwhile, as its health check would take it).

| fault | what the proxy does |
|---|---|
| 2 s added latency | every request waits 2 s before it is forwarded |
| connection resets | every other request has its connection reset (TCP RST) instead of an answer; open watches are reset 2 s after they start |
| blackhole | nothing is answered, open streams stop flowing; when the fault ends, what was held goes on |
| 429 with Retry-After | every request gets 429 `TooManyRequests` with `Retry-After: 1` |
| bursts of 500/503 | 1 s of 500 (then of 503) every 2 s |
| watch streams cut | every watch stream is cut 3 s after it starts |
| 410 Gone | etcd compacted at the start of the fault: open watches end with a 410 `Expired` event, and watches from older resourceVersions get the same, so every cache lists again |
| clock 10 min ahead | (not the proxy) one replica's process sees a wall clock 10 minutes ahead |

Columns:
- *failed*: config requests that did not get a 200 (must be 0: every pool was synced).
- *slowest answer*: the longest a config request took; an answer waits at most 2 s for the
  write that carries its served record, then goes out anyway.
- *answered before record durable*: `mcs_mcn_records_served_before_durable_total` summed over
  the replicas: answers sent after that 2 s bound, their records still pending in memory (and
  published once the API is back; the next column shows none was lost).
- *change served after*: from the pool change to every replica serving the new rendered config.
- *records lost / wrong*: machines whose Node's MachineConfigNode, 60 s after the last Node
  joined, had no bootstrap record, or one naming another replica or config (must be 0).
- *MCNs with >1 manager*: MCNs with more than one field manager on the main resource (must be 0).
- *MCNs filled later / written twice*: MCNs created before their record reached the leader and
  given it by a second write (designed), and MCN writes beyond those (must be 0).
- *API req/s*¹: requests of all three replicas to the API server (reads, watches, Lease, served
  records) per second, without the publisher's MCN and Event writes (work the joining Nodes
  ask for, paced by `--mcn-max-writes-per-second`): the average of the 3 s before the fault,
  the worst second during it, the worst second and the average of the 10 s after it.
- *bound*²: the most requests a second any second of the row may see: one relist of every watch
  of every replica (a list and a new watch each: what a compaction or a restart costs) plus
  three times the quiet rate. A retry loop without backoff would exceed it.
- *Lease holder changes*; *publisher writes without the Lease*: MCN or Event writes by a replica
  that no sample of the Lease (every 100 ms) within 1 s showed as the holder (must be 0: never
  two publishers).

EOF
# The document: the header, then one section per kind of API server; a run replaces its own
# section and keeps the other's figures.
python3 - "$out" "$header" "$table" "$section" "$(date -u +%Y-%m-%d)" "$(nproc)" <<'PY'
import re, sys
out, header, table, section, day, cores = sys.argv[1:]
titles = {"in-test": "On the in-test API server", "real": "On a real kube-apiserver (`KUBEBUILDER_ASSETS`)"}
try:
    old = open(out).read()
except FileNotFoundError:
    old = ""
sections = {}
for name in titles:
    m = re.search(r"<!-- %s -->\n(.*?)<!-- /%s -->\n" % (name, name), old, re.S)
    if m:
        sections[name] = m.group(1)
lines = open(table).read().splitlines()
body = "\n".join(lines[2:]).strip()
sections[section] = "## %s\n\nRun on %s, %s cores (`benches/api_faults.sh`).\n\n%s\n\n" % (titles[section], day, cores, body)
doc = open(header).read().rstrip("\n") + "\n\n"
for name in titles:
    if name in sections:
        doc += "<!-- %s -->\n%s<!-- /%s -->\n" % (name, sections[name], name)
open(out, "w").write(doc)
PY
echo "wrote $out ($section section)"
