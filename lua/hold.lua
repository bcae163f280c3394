-- hold.lua moves an instant checkout's hold on a buyer's wallet, the
-- wallet's side of a buy whose stock lives on another Cluster slot (a
-- two-phase transfer: hold, then post or void; docs/architecture.md,
-- "Instant checkout: stock and money in one decision"). A hold belongs to one buy request
-- (every attempt at it shares it, and the order id its first attempt
-- chose); its record's states are:
--   (none)                                  nothing held
--   hold|sum|deadline|request|amount|event  pending: amount taken from the
--                                           balance and counted held; event
--                                           is the charge it becomes
--   posted|order                            the charge made: its record (as
--                                           funds.lua's for a movement made)
--                                           and its event in the outbox
--   void                                    given back, or barred before any
--                                           hold: never held again
--
-- KEYS[1] balances hash  KEYS[2] held hash  KEYS[3] the hold's record
-- KEYS[4] (post) the record of the charge  KEYS[5] the group's funds outbox
-- KEYS[6] the group's holds, a sorted set by deadline
-- ARGV[1] mode: hold | post | void
-- ARGV[2] the wallet
-- ARGV[3] the hold's id (its member in the holds set)
-- ARGV[4] how long the records live, in seconds
-- ARGV[5..10] (hold) the amount taken from the wallet, the charge's sum
--         (what a retry must repeat), the deadline (unix ms: the stock
--         step refuses the hold after it), the request id, the charge's
--         event (funds.EncodeMovement), its order id
--
-- Returns "code|balance|changed|order|deadline": the wallet's balance
-- after, 1 when this call changed the record, and the hold's order and
-- deadline (hold: those of the request's first attempt). Codes:
--   ok                  hold: pending now or before; post: posted now or
--                       before; void: given back now, voided before, or
--                       barred (none was ever held: none can be any more)
--   insufficient_funds  hold: the wallet holds less than the amount; nothing kept
--   hold_expired        hold: voided before (the request was decided
--                       otherwise: its stored answer says how)
--   order_paid          hold: posted before (the order exists); void: it stands
--   order_cancelled     post: voided (or never held): nothing to post
--   invalid_request     hold: this request held another sum

local wallet = ARGV[2]
local function balance()
  return redis.call('HGET', KEYS[1], wallet) or '0'
end
local function answer(code, changed, order, deadline)
  return code .. '|' .. balance() .. '|' .. changed .. '|' .. (order or '') .. '|' .. (deadline or '0')
end
local rec = redis.call('GET', KEYS[3])
local mode = ARGV[1]
local sum, deadline, request, amount, event
if rec and string.sub(rec, 1, 5) == 'hold|' then
  sum, deadline, request, amount, event = string.match(rec, '^hold|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
end
local posted = rec and string.match(rec, '^posted|(.*)$')

if mode == 'hold' then
  if rec == 'void' then
    return answer('hold_expired', 0)
  end
  if posted then
    return answer('order_paid', 0, posted)
  end
  if event then
    if sum ~= ARGV[6] then
      return answer('invalid_request', 0)
    end
    return answer('ok', 0, string.match(event, '|([^|]*)|||[^|]*$'), deadline)
  end
  local want = tonumber(ARGV[5])
  if tonumber(balance()) < want then
    return answer('insufficient_funds', 0)
  end
  redis.call('HINCRBY', KEYS[1], wallet, -want)
  redis.call('HINCRBY', KEYS[2], wallet, want)
  redis.call('SET', KEYS[3], 'hold|' .. ARGV[6] .. '|' .. ARGV[7] .. '|' .. ARGV[8] .. '|' .. ARGV[5] .. '|' .. ARGV[9], 'EX', ARGV[4])
  redis.call('ZADD', KEYS[6], ARGV[7], ARGV[3])
  return answer('ok', 1, ARGV[10], ARGV[7])
end

if mode == 'post' then
  if posted then
    return answer('ok', 0, posted)
  end
  if not event then
    return answer('order_cancelled', 0)
  end
  local order = string.match(event, '|([^|]*)|||[^|]*$')
  local charge = redis.call('GET', KEYS[4])
  if charge and string.sub(charge, 1, 3) == 'ok|' then
    -- The order's charge was made another way (a payment of the order
    -- asked for before the hold was posted): the hold goes back, so the
    -- buyer pays once.
    redis.call('HINCRBY', KEYS[1], wallet, tonumber(amount))
    redis.call('HINCRBY', KEYS[2], wallet, -tonumber(amount))
    redis.call('SET', KEYS[3], 'posted|' .. order, 'EX', ARGV[4])
    redis.call('ZREM', KEYS[6], ARGV[3])
    return answer('ok', 1, order)
  end
  redis.call('HINCRBY', KEYS[2], wallet, -tonumber(amount))
  redis.call('SET', KEYS[4], 'ok|' .. sum .. '|' .. balance() .. '|' .. event, 'EX', ARGV[4])
  redis.call('SET', KEYS[3], 'posted|' .. order, 'EX', ARGV[4])
  redis.call('ZREM', KEYS[6], ARGV[3])
  redis.call('XADD', KEYS[5], '*', 'e', event)
  return answer('ok', 1, order)
end

-- void
if posted then
  return answer('order_paid', 0, posted)
end
if not event then
  -- Voided before, or never held: a barrier, so a late hold finds it.
  redis.call('SET', KEYS[3], 'void', 'EX', ARGV[4])
  return answer('ok', 0)
end
redis.call('HINCRBY', KEYS[1], wallet, tonumber(amount))
redis.call('HINCRBY', KEYS[2], wallet, -tonumber(amount))
redis.call('SET', KEYS[3], 'void', 'EX', ARGV[4])
redis.call('ZREM', KEYS[6], ARGV[3])
return answer('ok', 1)
