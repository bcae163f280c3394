-- settle.lua finds how the stock step decided an instant-checkout buy
-- whose wallet hold outlived its deadline (its process died, or never
-- heard back), and makes sure it never decides it after: the request's
-- stored answer if it has one, else a stored refusal 'hold_expired' in
-- its place, so a stock step arriving late answers that (no hanging
-- hold). One atomic step on the part of the sale that holds the
-- request.
--
-- KEYS[1] the part's stock hash (expire_at)   KEYS[2] the part's reqs hash
-- ARGV[1] the request's field (user_id|request_id)   ARGV[2] its qty
--
-- Returns the request's answer, "code|order_id|qty|remaining" (buy.lua's
-- stored format), or '' when the sale's keys are gone (nothing can be
-- decided on them).

local a = redis.call('HGET', KEYS[2], ARGV[1])
if a then
  return a
end
local s = redis.call('HMGET', KEYS[1], 'available', 'expire_at')
if not s[1] then
  return ''
end
a = 'hold_expired||' .. ARGV[2] .. '|' .. s[1]
redis.call('HSET', KEYS[2], ARGV[1], a)
local exp = tonumber(s[2] or '0')
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
return a
