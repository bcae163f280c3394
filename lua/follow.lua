-- follow.lua applies movements' shares to accounts of one group, each an
-- account other than the one its movement was decided on, once the ledger
-- holds the movement: exactly once per movement and account, whatever the
-- redeliveries. One call applies a batch's shares in the group (one
-- Cluster slot).
--
-- KEYS[1]   balances hash   account -> cents, of the group's accounts
-- KEYS[1+i] the follow record of share i: set once it is applied here
-- ARGV[1]   how long the records live, in seconds
-- ARGV[2i], ARGV[2i+1] share i's account and amount, in cents (negative:
--           a debit)
--
-- Returns the number of shares this call applied (the rest were applied
-- before).

local applied = 0
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'EX', ARGV[1]) then
    redis.call('HINCRBY', KEYS[1], ARGV[2 * i - 2], ARGV[2 * i - 1])
    applied = applied + 1
  end
end
return applied
