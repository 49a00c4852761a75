-- How many events wait in the inbox, the milliseconds left on its lease (-2: none) and when the oldest event sent
-- alone was published (-1: none), in one step (inbox.py: Inbox.look). Events sent alone whose fan-out has not
-- taken them for ARGV[2] seconds (their task lost with its worker) are appended to the inbox first.
-- KEYS: inbox, lease, alone set. ARGV: now, grace seconds. An empty inbox and alone set cost two reads.
local lost = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
for _, event in ipairs(lost) do
    redis.call('RPUSH', KEYS[1], event)
    redis.call('ZREM', KEYS[3], event)
end
local waiting = redis.call('LLEN', KEYS[1])
local lease = -2
if waiting > 0 then
    lease = redis.call('PTTL', KEYS[2])
end
local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
return {waiting, lease, oldest[2] or '-1'}
