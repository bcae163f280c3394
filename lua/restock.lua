-- restock.lua adds units to a sale atomically, also while it runs.
--
-- KEYS[1] stock hash
-- ARGV[1] units to add (>= 1)
--
-- Returns the available units after the restock, or -1 if the sale has no
-- stock hash.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local qty = tonumber(ARGV[1])
redis.call('HINCRBY', KEYS[1], 'total', qty)
return redis.call('HINCRBY', KEYS[1], 'available', qty)
