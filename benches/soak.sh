#!/usr/bin/env bash
# Soak (issue 27): one command. Builds the server and benches/soak.rs (release), then runs the
# harness: the real `machine-config-server start` against the tests' API server for 30 minutes
# of steady fetches, a rendered-config change every minute and Node churn, and the start/end
# figures table (RSS, open fds, threads, failed requests; benches/README.md).
# Knobs: MCS_SOAK_* environment variables (benches/README.md); `--quick` for a 3-minute run.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
echo "building machine-config-server and benches/soak.rs (release)" >&2
# One invocation for both, as benches/scale.sh does (one feature set for the library).
SOAK=$(cargo build --release --quiet --bin machine-config-server --bench soak --message-format=json |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "soak":
        print(m["executable"])')
[[ -x $SOAK ]] || { echo "could not build benches/soak.rs" >&2; exit 1; }
mkdir -p benches/results
RESULTS="benches/results/soak-$(date -u +%Y%m%dT%H%M%SZ).txt"
status=0
{ date -u +"%Y-%m-%dT%H:%MZ"; nice -n 10 "$SOAK" "$@"; } | tee "$RESULTS" || status=$?
echo "saved to $RESULTS" >&2
exit "$status"
