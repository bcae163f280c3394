-- warm.lua loads one part of a sale (the whole sale, or one bucket) into
-- Redis ("warm-up") or updates its settings. The counters (total,
-- available, sold) are written only when the hash is new or ARGV[9] is "1"
-- (a rebuild from the ledger); otherwise they are left alone, so warming a
-- running sale never resets its stock.
--
-- KEYS[1] stock hash
-- KEYS[2..n] the part's other keys, given the same expiry
-- ARGV[1] total   ARGV[2] sold      ARGV[3] per-user limit
-- ARGV[4] start   ARGV[5] end       (unix ms)
-- ARGV[6] status (active|paused|ended)
-- ARGV[7] unit price in cents
-- ARGV[8] expire_at (unix ms; 0 for none)
-- ARGV[9] "1" to overwrite the counters
-- ARGV[10] buckets: how many parts the sale has
-- ARGV[11] tags of the other parts, comma-separated (first part only; '')
-- ARGV[12] "1" when buys need a ticket   ARGV[13] proof-of-work difficulty
-- ARGV[14] "1" when only verified identities buy
-- ARGV[15] "1" when the sale has a waiting room   ARGV[16] when its queue
--          opens (unix ms)   ARGV[17] places it admits a second
-- ARGV[18] the merchant whose sale it is (0: the operator): whom a
--          payment credits
-- ARGV[19] "1" when the sale has instant checkout (buy.lua charges the
--          wallet in the buy)
--
-- Returns the available units. An expire_at in the past removes the sale.

local fresh = redis.call('EXISTS', KEYS[1]) == 0
if fresh or ARGV[9] == '1' then
  local total, sold = tonumber(ARGV[1]), tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'total', total, 'sold', sold, 'available', total - sold)
  -- Keys rebuilt from the ledger may lack the expiry: buy.lua sets it again.
  redis.call('HDEL', KEYS[1], 'ttl')
end
redis.call('HSET', KEYS[1], 'limit', ARGV[3], 'start', ARGV[4], 'end', ARGV[5],
  'status', ARGV[6], 'price', ARGV[7], 'expire_at', ARGV[8], 'buckets', ARGV[10],
  'ticket', ARGV[12], 'pow', ARGV[13], 'verified', ARGV[14], 'room', ARGV[15], 'qopen', ARGV[16], 'rate', ARGV[17],
  'merchant', ARGV[18], 'instant', ARGV[19])
if ARGV[11] ~= '' then
  redis.call('HSET', KEYS[1], 'tags', ARGV[11])
end
local available = tonumber(redis.call('HGET', KEYS[1], 'available'))
local exp = tonumber(ARGV[8])
for k = 1, #KEYS do
  if exp > 0 then
    redis.call('PEXPIREAT', KEYS[k], exp)
  else
    redis.call('PERSIST', KEYS[k])
  end
end
return available
