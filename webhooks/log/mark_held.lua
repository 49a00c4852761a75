-- DeliveryLog.held (writes.py): one delivery listed as held, if the log has it. KEYS: the delivery hash, then
-- the index of each state, then its tenant's index of each state (same order). ARGV: now, retention, delivery
-- id, the held state, then the name of each state, in the order of their indexes. Returns 1 if the delivery
-- was there.
local before = redis.call('HMGET', KEYS[1], 'state', 'started_at')
if not before[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'updated_at', ARGV[1], 'next_retry_at', '')
local states = (#KEYS - 1) / 2
for i = 1, states do
    local name = ARGV[4 + i]
    for _, index in ipairs({KEYS[1 + i], KEYS[1 + states + i]}) do
        if name == ARGV[4] then
            redis.call('ZADD', index, before[2] or ARGV[1], ARGV[3])
            redis.call('EXPIRE', index, ARGV[2])
        elseif name == before[1] then
            redis.call('ZREM', index, ARGV[3])
        end
    end
end
return 1
