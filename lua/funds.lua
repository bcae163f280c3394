-- funds.lua decides one movement of money on the one account whose
-- floor or ceiling it checks (the movement's side), atomically: the
-- movement's id makes a retry a no-op, the side's balance moves, the
-- decision is recorded and the movement's event appended to the side's
-- group outbox, in one call. The movement's other accounts follow once
-- the ledger has it (follow.lua). Every key lies in the side's group, one
-- Cluster slot.
--
-- KEYS[1] balances hash    account -> cents, of the group's accounts
-- KEYS[2] movement record  "ok|sum|balance|event" once made, or "void"
--                          for a movement cancelled before it was made
-- KEYS[3] outbox stream    one entry per movement made, field e: a line
--                          per transfer, read by the funds relay
-- KEYS[4] (cancel) the record of the movement this one cancels
-- ARGV[1] mode: move | cancel
-- ARGV[2] the side account
-- ARGV[3] the movement's delta to the side, in cents (negative: a debit)
-- ARGV[4] floor: the least the side may hold after a debit; '' for none
-- ARGV[5] ceiling: the most the side may hold after a credit; 0 for none
-- ARGV[6] the movement's sum: what a retry must repeat
-- ARGV[7] the event, the field e of the outbox entry
-- ARGV[8] how long the records live, in seconds
-- ARGV[9] (cancel) 1 when the caller saw the movement it cancels made (and
--         built this one, its reversal, from that record), 0 when it
--         found none
--
-- Returns "code|balance|made": the side's balance after, and 1 when this
-- call made the movement (0: made before, or nothing made). Codes:
--   ok                  made now or before; cancel: also when the movement
--                       it cancels was never made (made 0: it never will be)
--   insufficient_funds  the side would go below its floor; nothing changed or kept
--   balance_limit       the side would hold more than its ceiling; nothing changed or kept
--   invalid_request     this id made a movement of another sum before
--   order_cancelled     move: the movement was cancelled before it was made, so never will be
--   unavailable         cancel: the movement it cancels was made since the caller looked; it reads again

local side, delta, sum = ARGV[2], tonumber(ARGV[3]), ARGV[6]
local function balance()
  return redis.call('HGET', KEYS[1], side) or '0'
end

local rec = redis.call('GET', KEYS[2])
if rec == 'void' then
  return 'order_cancelled|' .. balance() .. '|0'
end
if rec then
  local s = string.match(rec, '^ok|([^|]*)|')
  if s ~= sum then
    return 'invalid_request|' .. balance() .. '|0'
  end
  return 'ok|' .. balance() .. '|0'
end

if ARGV[1] == 'cancel' then
  local target = redis.call('GET', KEYS[4])
  if not target or target == 'void' then
    -- Never made: a barrier, so it never will be (a late attempt finds it).
    redis.call('SET', KEYS[4], 'void', 'EX', ARGV[8])
    return 'ok|' .. balance() .. '|0'
  end
  if ARGV[9] ~= '1' then
    return 'unavailable|' .. balance() .. '|0'
  end
end

local bal = tonumber(balance())
local after = bal + delta
if delta < 0 and ARGV[4] ~= '' and after < tonumber(ARGV[4]) then
  return 'insufficient_funds|' .. balance() .. '|0'
end
local ceiling = tonumber(ARGV[5])
if delta > 0 and ceiling > 0 and after > ceiling then
  return 'balance_limit|' .. balance() .. '|0'
end
-- HINCRBY is exact in 64 bits; string.format keeps it whole (a number
-- concatenated would be written as 1e+15).
local now = string.format('%d', redis.call('HINCRBY', KEYS[1], side, ARGV[3]))
redis.call('SET', KEYS[2], 'ok|' .. sum .. '|' .. now .. '|' .. ARGV[7], 'EX', ARGV[8])
redis.call('XADD', KEYS[3], '*', 'e', ARGV[7])
return 'ok|' .. now .. '|1'
