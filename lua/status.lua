-- status.lua pauses, resumes or ends a sale.
--
-- KEYS[1] stock hash
-- ARGV[1] pause | resume | end
--
-- Returns the new status (active|paused|ended), or an error reply:
--   "sale_not_found" no stock hash for this sale
--   "ended"          the sale has ended; it cannot be paused or resumed

local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return redis.error_reply('sale_not_found')
end
local action = ARGV[1]
if action == 'end' then
  status = 'ended'
elseif status == 'ended' then
  return redis.error_reply('ended')
elseif action == 'pause' then
  status = 'paused'
else
  status = 'active'
end
redis.call('HSET', KEYS[1], 'status', status)
return status
