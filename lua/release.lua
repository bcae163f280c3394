-- release.lua returns a cancelled order's units to the sale, exactly once.
--
-- KEYS[1] stock hash
-- KEYS[2] buyers hash    user_id -> units bought
-- KEYS[3] released set   order ids already released
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] qty
--
-- Returns the available units after the release, -1 if the sale has no stock
-- hash, -2 if this order was released before (nothing changed).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('SADD', KEYS[3], ARGV[1]) == 0 then
  return -2
end
local exp = tonumber(redis.call('HGET', KEYS[1], 'expire_at') or '0')
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[3], exp)
end
local qty = tonumber(ARGV[3])
redis.call('HINCRBY', KEYS[1], 'sold', -qty)
if redis.call('HINCRBY', KEYS[2], ARGV[2], -qty) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[2])
end
return redis.call('HINCRBY', KEYS[1], 'available', qty)
