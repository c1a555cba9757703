-- wrk script for the preorder benchmark: POST /payment-button/process/preorder.
--
--   BENCH_SECRET_KEY=sk_test_... BENCH_BODY_FILE=body.json \
--     wrk --latency -c16 -t2 -d10s -s bench/preorder.lua http://127.0.0.1:8000/payment-button/process/preorder
--
-- BENCH_BODY_FILE: the JSON body to send (bench/bodies.py writes the realistic one and the ~9 KB one;
-- `python -m bench.bodies preorder-9kb` prints it). Without it, the realistic body below is sent.
-- BENCH_SECRET_KEY: sent as x-secret-key (the baseline ignores it; never printed).
--
-- Every response is checked: anything but 2xx is counted per status. done() prints one line
--   BENCH_RESULT {"requests":...,"non2xx":...,"statuses":{"500":3},"latency_us":{...},...}
-- that bench/wrk.py parses (wrk's own "Non-2xx or 3xx responses" line misses 3xx).

local DEFAULT_BODY = '{"amount": 19.99, "metadata": {"orderRef": "A-1042", "email": "buyer@example.com"}}'

local function read_file(path)
  local file = assert(io.open(path, "rb"))
  local content = file:read("*a")
  file:close()
  return content
end

local body_file = os.getenv("BENCH_BODY_FILE")
wrk.method = "POST"
wrk.body = (body_file and body_file ~= "") and read_file(body_file) or DEFAULT_BODY
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-secret-key"] = os.getenv("BENCH_SECRET_KEY") or "sk_test_bench"

-- setup() runs in the main Lua state once per thread; keep the threads to collect their counters.
local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

-- These run in each thread's own Lua state.
non2xx = 0
statuses = {}
function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, requests)
  local non2xx_total, by_status = 0, {}
  for _, thread in ipairs(threads) do
    non2xx_total = non2xx_total + thread:get("non2xx")
    for status, count in pairs(thread:get("statuses")) do
      by_status[status] = (by_status[status] or 0) + count
    end
  end
  local parts = {}
  for status, count in pairs(by_status) do
    table.insert(parts, string.format('"%d":%d', status, count))
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"non2xx":%d,"statuses":{%s},' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
    '"latency_us":{"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes, non2xx_total, table.concat(parts, ","),
    e.connect, e.read, e.write, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
