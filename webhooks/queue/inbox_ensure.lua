-- Leases the inbox to a new fan-out task when events wait and no task holds the lease (it lapsed with a lost
-- task), and on a Redis broker pushes that task's message to the head of its list (inbox.py: Inbox.ensure).
-- KEYS: inbox, lease and, on a Redis broker, the task's list. ARGV: the task's id, its message, lease seconds.
if redis.call('LLEN', KEYS[1]) > 0 and redis.call('SET', KEYS[2], 'scheduled:' .. ARGV[1], 'NX', 'EX', ARGV[3]) then
    if KEYS[3] then redis.call('RPUSH', KEYS[3], ARGV[2]) end
    return 1
end
return 0
