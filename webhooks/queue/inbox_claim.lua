-- The oldest events, without removing them, if this task holds the lease or takes it now it is free or only
-- scheduled; false if another task runs (inbox.py: Inbox.claim).
-- KEYS: inbox, lease. ARGV: the task's id, lease seconds, how many.
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] and string.sub(holder, 1, 10) ~= 'scheduled:' then
    return false
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
