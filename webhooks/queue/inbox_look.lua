-- How many events wait in the inbox, the milliseconds left on its lease (-2: none) and when the oldest event sent
-- in its own fan-out task was first seen (-1: none), in one step (inbox.py: Inbox.look). Events sent that way whose
-- fan-out has not taken them ARGV[2] seconds after a look first saw them (their task lost with its worker) are
-- appended to the inbox first; those never seen are dated now.
-- KEYS: inbox, lease, sent set. ARGV: now, grace seconds. Run only when the inbox or the sent set holds something:
-- an empty pair (an idle worker's every look) is one EXISTS, without this script.
local now = tonumber(ARGV[1])
local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if oldest[1] then
    local lost = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[2]))
    for _, event in ipairs(lost) do
        redis.call('RPUSH', KEYS[1], event)
        redis.call('ZREM', KEYS[3], event)
    end
    for _, event in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '+inf', '+inf')) do
        redis.call('ZADD', KEYS[3], now, event)
    end
    oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
end
local waiting = redis.call('LLEN', KEYS[1])
local lease = -2
if waiting > 0 then
    lease = redis.call('PTTL', KEYS[2])
end
return {waiting, lease, oldest[2] or '-1'}
