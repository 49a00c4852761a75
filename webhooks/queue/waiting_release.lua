-- Moves the waiting messages that are due onto their lists (waiting.py: WaitingSet.release_due).
-- KEYS: the waiting set. ARGV: now (Unix seconds), most to move.
-- Each member is the list it goes to, a newline, and the message. Returns how many it moved and when the next
-- one is due (false: none waits). Run only when the earliest is due: the caller reads it first (an idle look's
-- one command).
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local released = 0
if first[2] and tonumber(first[2]) <= tonumber(ARGV[1]) then
    local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
    for _, member in ipairs(due) do
        local at = string.find(member, '\n', 1, true)
        redis.call('LPUSH', string.sub(member, 1, at - 1), string.sub(member, at + 1))
    end
    if #due > 0 then
        redis.call('ZREM', KEYS[1], unpack(due))
    end
    released = #due
    first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
end
return {released, first[2] or false}
