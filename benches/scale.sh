#!/usr/bin/env bash
# Cluster mode at scale (issue 15): one command. Builds the server and benches/scale.rs
# (release), then runs the harness: a 5000-Node cluster in the tests' fake API server, the real
# `machine-config-server start` against it, and the figures table (benches/README.md).
# Knobs: MCS_SCALE_* environment variables (benches/README.md); `--quick` for a small smoke run.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
echo "building machine-config-server and benches/scale.rs (release)" >&2
# One invocation for both: built apart, the library would be built (and linked) twice with
# different feature sets (dev-dependencies unify features only for the bench).
SCALE=$(cargo build --release --quiet --bin machine-config-server --bench scale --message-format=json |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "scale":
        print(m["executable"])')
[[ -x $SCALE ]] || { echo "could not build benches/scale.rs" >&2; exit 1; }
mkdir -p benches/results
RESULTS="benches/results/scale-$(date -u +%Y%m%dT%H%M%SZ).txt"
"$SCALE" "$@" | tee "$RESULTS"
echo "saved to $RESULTS" >&2
