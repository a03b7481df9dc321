-- wrk script for benches/run.sh. Headers come from wrk -H.
-- MCS_BENCH_PATHS: space-separated request paths, requested in turn by each connection's thread.
-- After the run it prints one machine-readable RESULT line.
local paths = {}
for path in string.gmatch(os.getenv("MCS_BENCH_PATHS") or "/", "%S+") do
  paths[#paths + 1] = path
end

if #paths == 1 then
  -- One path: let wrk pre-format the request once.
  wrk.path = paths[1]
else
  local next_path = 0
  request = function()
    next_path = next_path % #paths + 1
    return wrk.format(nil, paths[next_path])
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d bytes=%d p50_us=%d p90_us=%d p99_us=%d " ..
    "connect_errors=%d read_errors=%d write_errors=%d status_errors=%d timeouts=%d\n",
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
