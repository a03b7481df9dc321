#!/usr/bin/env bash
# Long fuzzing runs (docs/fuzzing.md): every fuzz target of tests/fuzz/ (or those named) for
# MINUTES each, one after another, then a table: target, time, executions, corpus size, findings.
#
#   tests/fuzz/run.sh [--minutes N | --seconds N] [TARGET...]     (default: 10 minutes each)
#
# Needs the nightly toolchain and cargo-fuzz (`rustup toolchain install nightly`,
# `cargo install cargo-fuzz --locked`); stops with that hint if either is missing. It builds the
# targets with debug assertions and AddressSanitizer (cargo-fuzz's default; serde_yaml's YAML
# parser is unsafe translated C), seeds each working corpus tests/fuzz/corpus/TARGET/ (kept
# between runs, not committed) with the committed seeds, the regressions and the inputs derived
# from the project's fixtures (and the upstream-rendered fixture when MCS_UPSTREAM_ASSETS names
# it, default ../shared beside the checkout), then fuzzes at `nice -n 10`. A finding stops its
# target: the input is under tests/fuzz/artifacts/TARGET/ and the log names the property.
# The table is also saved under tests/fuzz/results/.
set -euo pipefail
FUZZ=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$FUZZ/../.." && pwd)
cd "$REPO"

seconds=600
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) seconds=$(($2 * 60)); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ "${#targets[@]}" -eq 0 ]; then
  for file in "$FUZZ"/fuzz_targets/*.rs; do targets+=("$(basename "$file" .rs)"); done
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "error: the nightly toolchain is missing: rustup toolchain install nightly" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "error: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
  exit 1
fi

assets=${MCS_UPSTREAM_ASSETS:-}
if [ -z "$assets" ] && [ -d "$REPO/../shared" ]; then
  assets=$(cd "$REPO/../shared" && pwd)
fi

echo "== building the fuzz targets (nightly, debug assertions, AddressSanitizer)" >&2
nice -n 10 cargo +nightly fuzz build --debug-assertions --fuzz-dir "$FUZZ" >&2

echo "== seeding the working corpora" >&2
corpus="$FUZZ/corpus"
for target in "${targets[@]}"; do
  mkdir -p "$corpus/$target"
  cp -n "$FUZZ/seeds/$target"/* "$corpus/$target/" 2>/dev/null || true
  if [ -d "$FUZZ/regressions/$target" ]; then
    cp -n "$FUZZ/regressions/$target"/* "$corpus/$target/" 2>/dev/null || true
  fi
done
# The fixture-derived inputs, written by the replay test (which also checks them).
export_dir=$(mktemp -d)
trap 'rm -rf "$export_dir"' EXIT
MCS_UPSTREAM_ASSETS="$assets" MCS_FUZZ_CORPUS_OUT="$export_dir" \
  nice -n 10 cargo test --quiet --test fuzz_seeds >&2
for target in "${targets[@]}"; do
  if [ -d "$export_dir/$target" ]; then
    # Whole realistic configs (over 64 KiB) are replayed by the test; the fuzzers mutate the
    # chunks, which run faster.
    find "$export_dir/$target" -type f -size -64k -exec cp -n {} "$corpus/$target/" \;
  fi
done

max_len() {
  case "$1" in
    pool_path|accept|dataurl|token_file|kubeconfig) echo 4096 ;;
    *) echo 65536 ;;
  esac
}
dict() {
  case "$1" in
    pool_path|accept|dataurl|token_file|kubeconfig) echo "$FUZZ/dicts/http.dict" ;;
    *) echo "$FUZZ/dicts/json.dict" ;;
  esac
}

mkdir -p "$FUZZ/results"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
results="$FUZZ/results/fuzz-$stamp.txt"
logs="$FUZZ/results/logs-$stamp"
mkdir -p "$logs"
rows=()
status=0
for target in "${targets[@]}"; do
  artifacts="$FUZZ/artifacts/$target"
  mkdir -p "$artifacts"
  before=$(find "$artifacts" -type f | wc -l)
  echo "== fuzzing $target for $seconds s" >&2
  started=$(date +%s)
  set +e
  nice -n 10 cargo +nightly fuzz run --debug-assertions --fuzz-dir "$FUZZ" "$target" "$corpus/$target" -- \
    -max_total_time="$seconds" -max_len="$(max_len "$target")" -dict="$(dict "$target")" \
    -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    >"$logs/$target.log" 2>&1
  code=$?
  set -e
  elapsed=$(($(date +%s) - started))
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$target.log" | tail -1 | grep -o '[0-9]*$' || true)
  if [ -z "$executions" ]; then
    # A crash ends the run before the final stats: the last status line has the count.
    executions=$(grep -o '^#[0-9]*' "$logs/$target.log" | tail -1 | tr -d '#' || true)
  fi
  corpus_size=$(find "$corpus/$target" -type f | wc -l)
  findings=$(($(find "$artifacts" -type f | wc -l) - before))
  if [ "$code" -ne 0 ] || [ "$findings" -gt 0 ]; then
    status=1
    echo "   $target: FINDING (exit $code), see $logs/$target.log and $artifacts/" >&2
    grep -m1 -E "panicked at|ERROR: AddressSanitizer|ERROR: libFuzzer" -A2 "$logs/$target.log" >&2 || true
  fi
  rows+=("$(printf '%-20s %8s %14s %10s %9s' "$target" "${elapsed}s" "${executions:-?}" "$corpus_size" "$findings")")
done

{
  echo "machine-config-server fuzzing, $stamp, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $seconds s per target"
  printf '%-20s %8s %14s %10s %9s\n' target time executions corpus findings
  printf '%s\n' "${rows[@]}"
} | tee "$results"
echo "saved to $results (logs in $logs)" >&2
exit "$status"
