-- The broker-side chores of one look, in one step (chores.py).
-- KEYS: the inbox, its lease and, on a Redis broker, the waiting set. ARGV: now (Unix seconds), most to release.
-- Moves the waiting messages that are due to their lists, and returns how many it moved, when the next one is
-- due (false: none waits), how many events wait in the inbox and the milliseconds left on its lease (-2: none).
-- An idle broker costs two reads: the waiting set's first member and the inbox's length.
local released, earliest = 0, false
if KEYS[3] then
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if first[2] and tonumber(first[2]) <= tonumber(ARGV[1]) then
        local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
        for _, member in ipairs(due) do
            local at = string.find(member, '\n', 1, true)
            redis.call('LPUSH', string.sub(member, 1, at - 1), string.sub(member, at + 1))
        end
        if #due > 0 then
            redis.call('ZREM', KEYS[3], unpack(due))
        end
        released = #due
        first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    end
    earliest = first[2] or false
end
local waiting = redis.call('LLEN', KEYS[1])
local lease = -2
if waiting > 0 then
    lease = redis.call('PTTL', KEYS[2])
end
return {released, earliest, waiting, lease}
