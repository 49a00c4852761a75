-- Extends the lease if the task still holds it (inbox.py: Inbox.renewing).
-- KEYS: lease. ARGV: the task's id, lease seconds.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 0
