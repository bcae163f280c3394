-- accept.lua puts units taken out of another bucket by move.lua into this
-- one, exactly once per move id (a move is delivered again after a crash,
-- and twice is the same as once).
--
-- KEYS[1] stock hash of the destination bucket (its expire_at is the set's)
-- KEYS[2] arrived set of the destination bucket   move ids received
-- ARGV[1] move id   ARGV[2] units
--
-- Returns "code|available|arrived": the available units after, and 1 if
-- this call delivered the units, 0 if the move had arrived before. Codes:
--   ok              the move's units are in this bucket (now or before)
--   sale_not_found  the bucket is gone (its sale expired: nothing to
--                   deliver to)

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'sale_not_found||0'
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 'ok|' .. redis.call('HGET', KEYS[1], 'available') .. '|0'
end
local exp = tonumber(redis.call('HGET', KEYS[1], 'expire_at') or '0')
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
local n = tonumber(ARGV[2])
redis.call('HINCRBY', KEYS[1], 'total', n)
return 'ok|' .. string.format('%d', redis.call('HINCRBY', KEYS[1], 'available', n)) .. '|1'
