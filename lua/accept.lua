-- accept.lua puts units taken out of another bucket by move.lua into this
-- one, exactly once per move id (a move is delivered again after a crash,
-- and twice is the same as once).
--
-- KEYS[1] stock hash of the destination bucket
-- KEYS[2] arrived set of the destination bucket   move ids received
-- ARGV[1] move id   ARGV[2] units
--
-- Returns the available units after, -1 if the bucket is gone (its sale
-- expired: nothing to deliver to), -2 if this move had arrived before.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return -2
end
local exp = tonumber(redis.call('HGET', KEYS[1], 'expire_at') or '0')
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
local n = tonumber(ARGV[2])
redis.call('HINCRBY', KEYS[1], 'total', n)
return redis.call('HINCRBY', KEYS[1], 'available', n)
