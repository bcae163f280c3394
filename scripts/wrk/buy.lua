-- wrk script for Seckill's buy endpoint: every request carries a fresh
-- request_id and a token picked from a file, so it looks like many
-- shoppers each buying once, not one client retrying.
--
--   seckill loadtest --users 10000 --tokens-out tokens.txt   # mint tokens
--   wrk -t2 -c64 -d30s -s scripts/wrk/buy.lua http://127.0.0.1:8080 -- tokens.txt 1
--
-- Arguments after "--": the tokens file (one token per line, followed by a
-- buy ticket and/or "pass:" and an admission pass, separated by spaces, as
-- `seckill loadtest --tokens-out` writes them for a sale with
-- require_ticket or waiting_room), the sale
-- id, and optionally the route: buy (the default), or healthz, which sends
-- the same headers as a GET /healthz (the baseline of `seckill bench
-- --case outside`). At the end it prints the answers by HTTP status (200
-- bought, 409 sold out / limit / window, 429 rate limited) and the latency
-- percentiles. `seckill loadtest` does the same and also audits the
-- result; use it to check correctness.

local threads = {}
local counter = 0
local tokens = {}
local tickets = {}
local passes = {}
local sale = "1"
local route = "buy"
statuses = {} -- global: done() reads it from each thread

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  local path = args[1] or "tokens.txt"
  sale = args[2] or "1"
  route = args[3] or "buy"
  for line in io.lines(path) do
    local token, a, b = line:match("^(%S+)%s*(%S*)%s*(%S*)$")
    if token then
      tokens[#tokens + 1] = token
      tickets[#tokens], passes[#tokens] = "", ""
      for _, f in ipairs({a, b}) do
        if f:sub(1, 5) == "pass:" then passes[#tokens] = f:sub(6) elseif f ~= "" then tickets[#tokens] = f end
      end
    end
  end
  if #tokens == 0 then error("no tokens in " .. path) end
  math.randomseed(os.time() * 1000 + tid)
end

function request()
  counter = counter + 1
  local i = math.random(#tokens)
  local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. tokens[i],
  }
  if route == "healthz" then
    return wrk.format("GET", "/healthz", headers)
  end
  local extra = ""
  if tickets[i] ~= "" then extra = string.format(',"ticket":"%s"', tickets[i]) end
  if passes[i] ~= "" then extra = extra .. string.format(',"pass":"%s"', passes[i]) end
  local body = string.format('{"qty":1,"request_id":"wrk-%d-%d-%d"%s}', tid, os.time(), counter, extra)
  return wrk.format("POST", "/api/sales/" .. sale .. "/buy", headers, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("statuses")) do
      total[status] = (total[status] or 0) + n
    end
  end
  io.write("answers by status:")
  for status, n in pairs(total) do
    io.write(string.format("  %d: %d", status, n))
  end
  io.write("\n")
  for _, p in ipairs({ 50, 90, 99, 99.9 }) do
    io.write(string.format("p%g %.2f ms  ", p, latency:percentile(p) / 1000))
  end
  io.write("\n")
end
