-- status.lua pauses, resumes or ends a sale (one part of it).
--
-- KEYS[1] stock hash
-- ARGV[1] pause | resume | end
--
-- Returns "code|status", the status being the part's after the call
-- (active|paused|ended). Codes:
--   ok              the status is set
--   ended           the sale has ended; it cannot be paused or resumed
--   sale_not_found  no stock hash for this sale

local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return 'sale_not_found|'
end
local action = ARGV[1]
if action == 'end' then
  status = 'ended'
elseif status == 'ended' then
  return 'ended|ended'
elseif action == 'pause' then
  status = 'paused'
else
  status = 'active'
end
redis.call('HSET', KEYS[1], 'status', status)
return 'ok|' .. status
