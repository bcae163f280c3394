-- move.lua takes units out of one bucket of a sale, on their way to
-- another (the rebalancer's first step; accept.lua is the second). The
-- units leave this bucket's total and available at once and are recorded
-- in its moves hash until the destination has them, so a crash between the
-- two steps can leave units in transit (not on sale for a while, found and
-- delivered by the next rebalance) but never creates any.
--
-- KEYS[1] stock hash of the source bucket (available, total, status, and
--         expire_at, the moves hash's expiry)
-- KEYS[2] moves hash of the source bucket   move id -> "destination tag|units"
-- ARGV[1] move id   ARGV[2] destination tag   ARGV[3] units wanted
--
-- Returns the units taken: at most those wanted and those available; 0 if
-- none, if the bucket is gone, or if the sale is not active (paused by the
-- merchant or by a repair rebuilding its keys, or ended: nothing to
-- balance, and a rebuild's counters must not move under it).

local s = redis.call('HMGET', KEYS[1], 'available', 'status')
if s[2] ~= 'active' then
  return 0
end
local avail = tonumber(s[1] or '0')
local n = math.min(tonumber(ARGV[3]), avail)
if n <= 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'available', -n)
redis.call('HINCRBY', KEYS[1], 'total', -n)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. '|' .. string.format('%d', n))
local exp = tonumber(redis.call('HGET', KEYS[1], 'expire_at') or '0')
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
return n
