-- restock.lua adds units to a sale atomically, also while it runs.
--
-- KEYS[1] stock hash
-- ARGV[1] units to add (>= 1)
--
-- Returns "code|available": the available units after the restock. Codes:
--   ok              the units were added
--   sale_not_found  no stock hash for this sale

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'sale_not_found|'
end
local qty = tonumber(ARGV[1])
redis.call('HINCRBY', KEYS[1], 'total', qty)
return 'ok|' .. string.format('%d', redis.call('HINCRBY', KEYS[1], 'available', qty))
