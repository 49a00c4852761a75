-- A fan-out task is done (inbox.py: Inbox.done). KEYS and ARGV[1..3] as inbox_ensure.lua's, for the next
-- task; ARGV[4]: the id of the task that is done, ARGV[5]: how many events it fanned out.
-- Removes them if that task still holds the lease, then hands the lease to the next task if events wait, or
-- frees it. Returns -1 if the lease was lost (the events stay for its holder), else how many events wait.
if redis.call('GET', KEYS[2]) ~= ARGV[4] then
    return -1
end
redis.call('LTRIM', KEYS[1], ARGV[5], -1)
local waiting = redis.call('LLEN', KEYS[1])
if waiting > 0 then
    redis.call('SET', KEYS[2], 'scheduled:' .. ARGV[1], 'EX', ARGV[3])
    if KEYS[3] then redis.call('RPUSH', KEYS[3], ARGV[2]) end
else
    redis.call('DEL', KEYS[2])
end
return waiting
