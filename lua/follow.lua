-- follow.lua applies a movement's share to one of its accounts other than
-- the one it was decided on, once the ledger holds the movement: exactly
-- once per movement and account, whatever the redeliveries.
--
-- KEYS[1] balances hash   account -> cents, of the account's group
-- KEYS[2] follow record   set once this movement's share is applied here
-- ARGV[1] account   ARGV[2] its share, in cents (negative: a debit)
-- ARGV[3] how long the record lives, in seconds
--
-- Returns "code|balance|applied": the account's balance after, and 1 when
-- this call applied the share (0: applied before). Codes:
--   ok  the share is applied (now or before)

if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) == false then
  return 'ok|' .. (redis.call('HGET', KEYS[1], ARGV[1]) or '0') .. '|0'
end
return 'ok|' .. string.format('%d', redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])) .. '|1'
