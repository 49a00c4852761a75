-- DeliveryLog.held (writes.py): one delivery listed as held, if the log has it. KEYS: the delivery hash, then
-- the index of each state. ARGV: now, retention, delivery id, the held state, then the name of each state, in
-- the order of their indexes. Returns 1 if the delivery was there.
local before = redis.call('HMGET', KEYS[1], 'state', 'started_at')
if not before[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'updated_at', ARGV[1], 'next_retry_at', '')
for i = 2, #KEYS do
    local name = ARGV[3 + i]
    if name == ARGV[4] then
        redis.call('ZADD', KEYS[i], before[2] or ARGV[1], ARGV[3])
        redis.call('EXPIRE', KEYS[i], ARGV[2])
    elseif name == before[1] then
        redis.call('ZREM', KEYS[i], ARGV[3])
    end
end
return 1
