-- Accepts one event published alone (inbox.py: Inbox.append), in one round trip.
-- When nothing waits (the inbox empty, no fan-out task holding its lease, no event sent in its own task still
-- waiting for its fan-out), the event goes as its own fan-out task: it is noted, undated, in the sent set (so that
-- it outlives a task message lost with its worker) and, on a Redis broker, its task pushed to the head of its
-- list; elsewhere the caller sends it. Otherwise it is appended to the inbox and, when it is the first to wait (or,
-- on a Redis broker, whenever no task holds the lease: its task was lost), the inbox is leased to a new fan-out
-- task, pushed here on a Redis broker. On a Redis broker, a task to push whose list was not given changes nothing
-- and returns -1: the caller gives the tasks only when it expects them to be needed.
-- KEYS: inbox, lease, sent set; on a Redis broker also the fan-out task's list and the lone event's task's list
--       (or neither: -1 if one is needed).
-- ARGV: the event (JSON), the fan-out task's id, its message, lease seconds, '1' on a Redis broker (the script
--       pushes; it schedules on any append), the lone event's task message.
-- Returns 2: the event goes alone; 1: appended, and the inbox's fan-out scheduled; 0: appended; -1: the tasks
-- are wanted.
local waiting = redis.call('LLEN', KEYS[1])
local leased = redis.call('EXISTS', KEYS[2]) == 1
if waiting == 0 and not leased and redis.call('ZCARD', KEYS[3]) == 0 then
    if ARGV[5] == '1' and not KEYS[5] then return -1 end
    redis.call('ZADD', KEYS[3], '+inf', ARGV[1])
    if KEYS[5] then redis.call('RPUSH', KEYS[5], ARGV[6]) end
    return 2
end
local schedule = (waiting == 0 or ARGV[5] == '1') and not leased
if schedule and ARGV[5] == '1' and not KEYS[4] then return -1 end
redis.call('RPUSH', KEYS[1], ARGV[1])
if schedule then
    redis.call('SET', KEYS[2], 'scheduled:' .. ARGV[2], 'EX', ARGV[4])
    if KEYS[4] then redis.call('RPUSH', KEYS[4], ARGV[3]) end
    return 1
end
return 0
