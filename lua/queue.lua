-- queue.lua is one step of a sale's waiting room (API.md, Waiting room):
-- it advances admission to now, then joins a shopper or reads a place.
--
-- Admission is derived from the clock, not driven by a process: each call
-- admits the places that admit_per_second allows for the time since the
-- last call (the fraction carried over), never past the end of the queue
-- (time with nobody waiting banks nothing), and none while the sale is
-- paused, over or sold out. Any number of server processes may call it;
-- none of them has to. The clock is the caller's: once any call has
-- stepped past the start, a join counts as after it whatever its caller's
-- clock says, so a process running behind cannot hand out a drawn place
-- among those already let in; one running ahead lets in its lead's worth
-- early, once.
--
-- KEYS[1] the sale's first stock hash: room, qopen, start, end, status,
--         rate, available, buckets, expire_at (warm.lua)
-- KEYS[2] queue   sorted set: user id -> score. Those who join before the
--                 start score a random draw below 2^52 (so their order is
--                 a lottery among them); later ones 2^52 + their arrival
--                 number, behind every early one, in arrival order.
-- KEYS[3] room    hash: through (places admitted), last (unix ms of the
--                 last advance), rem (carried fraction, in ms x places/s),
--                 seq (arrivals after the start), early (joined before it)
-- ARGV[1] 'join' or 'read'
-- ARGV[2] now (unix ms)
-- ARGV[3] user id ('' to read the room only)
-- ARGV[4] the joiner's draw: a random integer below 2^52, in decimal
-- ARGV[5] '1' when the caller saw the sale's stock gone (a sale in
--         several parts: this script sees only the first)
--
-- Returns "code|place|through|size|early|gone": code ok, not_started (the
-- queue has not opened), ended, sold_out (join only), not_found (the sale
-- has no room) or sale_not_found; place 0 for a user not in the queue;
-- gone 1 when the stock is gone.

local st = redis.call('HMGET', KEYS[1], 'room', 'qopen', 'start', 'end', 'status', 'rate', 'available', 'buckets', 'expire_at')
if not st[3] then
  return 'sale_not_found|0|0|0|0|0'
end
if st[1] ~= '1' then
  return 'not_found|0|0|0|0|0'
end
local now = tonumber(ARGV[2])
local qopen, start, stop, rate = tonumber(st[2]), tonumber(st[3]), tonumber(st[4]), tonumber(st[6])
local gone = ARGV[5] == '1' or (tonumber(st[8]) == 1 and tonumber(st[7]) <= 0)
local over = st[5] == 'ended' or now >= stop
local held = over or gone or st[5] ~= 'active'

local r = redis.call('HMGET', KEYS[3], 'through', 'last', 'rem', 'seq', 'early')
local started = r[2] ~= false -- a call has stepped past the start
local through, last, rem = tonumber(r[1]) or 0, math.max(tonumber(r[2]) or start, start), tonumber(r[3]) or 0
local seq, early = tonumber(r[4]) or 0, tonumber(r[5]) or 0
local size = redis.call('ZCARD', KEYS[2])
local dirty = false

if now > last then
  -- ms x places/s, bounded so that it stays an exact integer.
  local units = math.min(now - last, 1e9) * rate + rem
  local n = math.floor(units / 1000)
  local carry = units - n * 1000
  if held then
    n, carry = 0, 0
  end
  local clipped = through + n >= size
  if clipped then
    n, carry = size - through, 0
  end
  -- While only the carry grows there is nothing to write: the next call
  -- counts from the same last. Letting in, a hold and the queue's end
  -- (time with nobody waiting banks nothing) move last on.
  if n > 0 or held or clipped or not started then
    through, last, rem, dirty, started = through + n, now, carry, true, true
  end
end

local code = 'ok'
if ARGV[1] == 'join' then
  if now < qopen then
    code = 'not_started'
  elseif over then
    code = 'ended'
  elseif gone then
    code = 'sold_out'
  elseif not redis.call('ZSCORE', KEYS[2], ARGV[3]) then
    local score
    if now < start and not started then
      score, early = ARGV[4], early + 1
    else
      seq = seq + 1
      score = string.format('%d', 4503599627370496 + seq)
    end
    redis.call('ZADD', KEYS[2], score, ARGV[3])
    size, dirty = size + 1, true
  end
end

if dirty then
  redis.call('HSET', KEYS[3], 'through', string.format('%d', through), 'rem', string.format('%d', rem),
    'seq', string.format('%d', seq), 'early', string.format('%d', early))
  if started then -- 'last' is written only once a call stepped past the start
    redis.call('HSET', KEYS[3], 'last', string.format('%d', last))
  end
  local exp = tonumber(st[9])
  if exp and exp > 0 then
    redis.call('PEXPIREAT', KEYS[2], exp)
    redis.call('PEXPIREAT', KEYS[3], exp)
  end
end

local place = 0
if ARGV[3] ~= '' then
  local rank = redis.call('ZRANK', KEYS[2], ARGV[3])
  if rank then
    place = rank + 1
  end
end
local flag = '0'
if gone then
  flag = '1'
end
return code .. '|' .. place .. '|' .. string.format('%d', through) .. '|' .. size .. '|' .. string.format('%d', early) .. '|' .. flag
