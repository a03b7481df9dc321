-- wrk script for benches/run.sh. Common headers come from wrk -H.
-- MCS_BENCH_TARGETS: space-separated PATH@VERSION entries; each thread requests them in turn,
-- asking for VERSION the way Ignition does (Accept: application/vnd.coreos.ignition+json;version=VERSION, */*;q=0.1).
-- After the run it prints one machine-readable RESULT line.
local requests = {}
for path, version in string.gmatch(os.getenv("MCS_BENCH_TARGETS") or "/@3.4.0", "([^%s@]+)@(%S+)") do
  local headers = {}
  for name, value in pairs(wrk.headers) do
    headers[name] = value
  end
  headers["Accept"] = "application/vnd.coreos.ignition+json;version=" .. version .. ", */*;q=0.1"
  -- wrk adds Host only to the request it formats itself; HTTP/1.1 requires it (nginx: 400).
  headers["Host"] = headers["Host"] or (wrk.host .. ":" .. wrk.port)
  requests[#requests + 1] = wrk.format(nil, path, headers)
end

local next_request = 0
request = function()
  next_request = next_request % #requests + 1
  return requests[next_request]
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
