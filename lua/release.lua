-- release.lua returns a cancelled order's units to the sale, exactly once.
--
-- KEYS[1] stock hash    available, sold; expire_at is the released set's
-- KEYS[2] buyers hash    user_id -> units bought
-- KEYS[3] released set   order ids already released
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] qty
--
-- Returns "code|available|released": the available units after, and 1 if
-- this call released the units, 0 if the order was released before
-- (nothing changed). Codes:
--   ok              the order's units are back on sale (now or before)
--   sale_not_found  no stock hash for this sale (nothing to release into)

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'sale_not_found||0'
end
if redis.call('SADD', KEYS[3], ARGV[1]) == 0 then
  return 'ok|' .. redis.call('HGET', KEYS[1], 'available') .. '|0'
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
return 'ok|' .. string.format('%d', redis.call('HINCRBY', KEYS[1], 'available', qty)) .. '|1'
