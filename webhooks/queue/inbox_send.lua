-- Sends fan-out tasks that carry their events (inbox.py: Inbox.send_events, a publish_events() batch on a Redis
-- broker): the events noted in the set of events sent in their own task, undated (+inf) until a worker's look
-- dates them, and the messages pushed, in one step.
-- KEYS: the sent set, then each list the messages go to.
-- ARGV: how many events, the events (JSON); then for each list in KEYS order, how many messages and the messages.
local events = tonumber(ARGV[1])
for i = 2, events + 1, 500 do
    local args = {}
    for j = i, math.min(i + 499, events + 1) do
        args[#args + 1] = '+inf'
        args[#args + 1] = ARGV[j]
    end
    redis.call('ZADD', KEYS[1], unpack(args))
end
local at = events + 2
for list = 2, #KEYS do
    local count = tonumber(ARGV[at])
    for i = at + 1, at + count, 1000 do
        redis.call('LPUSH', KEYS[list], unpack(ARGV, i, math.min(i + 999, at + count)))
    end
    at = at + count + 1
end
return 1
