-- wrk script for the school-data benchmark.
--
--   wrk -t2 -c50 -d10s -s bench/wrk/requests.lua https://127.0.0.1:PORT -- REQUESTS_FILE
--
-- REQUESTS_FILE has one request per line: "<api key>\t<path>[\t<entity tag>]" (an empty
-- key sends no Authorization header; a tag is sent as If-None-Match). Every request is formatted once in init(), so the per-request
-- cost in wrk is a table lookup; each thread starts at its own point of the list and
-- walks it round-robin. done() prints one JSON line with the counts and the whole
-- latency histogram (microseconds, as value,count pairs), so that the runner can merge
-- several runs into exact percentiles.

local threads = {}
local requests = {}
local position = 0

function setup(thread)
  thread:set("number", #threads)
  table.insert(threads, thread)
end

function init(args)
  local file = assert(io.open(args[1], "r"), "cannot open the request list " .. tostring(args[1]))
  for line in file:lines() do
    local key, path, tag = line:match("^([^\t]*)\t([^\t]+)\t?(.*)$")
    if path then
      local headers = {}
      if key ~= "" then headers["Authorization"] = "Bearer " .. key end
      if tag ~= "" then headers["If-None-Match"] = tag end
      requests[#requests + 1] = wrk.format("GET", path, headers)
    end
  end
  file:close()
  assert(#requests > 0, "the request list is empty")
  -- Threads start far apart so that they do not ask for the same rows at the same time.
  position = (number * 7919) % #requests
end

function request()
  position = position % #requests + 1
  return requests[position]
end

function done(summary, latency, requests)
  local e = summary.errors
  local histogram = {}
  for i = 1, #latency do
    local value, count = latency(i)
    if count and count > 0 then
      histogram[#histogram + 1] = value .. "," .. count
    end
  end
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"histogram":[%s]}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout, table.concat(histogram, ",")))
end
