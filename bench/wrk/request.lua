-- wrk script for the sluice benchmark: a fixed request from the environment, rotating over a set
-- of API keys, and a machine-readable summary (p50/p90/p99/p99.9 in microseconds, error counts)
-- from done().
--   BENCH_METHOD (default POST), BENCH_BODY, BENCH_KEYS (comma-separated keys; each request
--   carries the next one as "Authorization: Bearer <key>")
local method = os.getenv("BENCH_METHOD") or "POST"
local body = os.getenv("BENCH_BODY") or ""
local keys = {}
for k in string.gmatch(os.getenv("BENCH_KEYS") or "", "[^,]+") do keys[#keys + 1] = k end

local requests = {}
local n = 0

function init(args)
  local headers = { ["Host"] = wrk.headers["Host"] }
  if body ~= "" then headers["Content-Type"] = "application/json" end
  if #keys == 0 then
    requests[1] = wrk.format(method, nil, headers, body ~= "" and body or nil)
  else
    for i, k in ipairs(keys) do
      headers["Authorization"] = "Bearer " .. k
      requests[i] = wrk.format(method, nil, headers, body ~= "" and body or nil)
    end
  end
end

function request()
  n = n + 1
  if n > #requests then n = 1 end
  return requests[n]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean))
end
