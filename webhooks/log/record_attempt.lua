-- DeliveryLog.record_attempts (writes.py): one command per attempt, whatever the attempt was. KEYS: the delivery
-- hash, its attempts list, the index of all deliveries, the endpoint's index, the endpoint's last attempt,
-- its counts for this hour, the event kind's index, the event id's index, the tenant's index, then the index of
-- each state, then the tenant's index of each state (in the same order).
-- ARGV: now, retention, delivery id, event id, endpoint id, event name, body,
-- state, attempt number, last result, latency, next retry ("" for none), the attempt as JSON, history
-- kept, the delivery counter to increment (``health.counted_as``; "" for none) with its time to live, and the
-- latency bucket to increment ("" without a response), the tenant, then the name of each state, in the order of
-- their indexes. Every attempt increments the hour's ``attempts``; a delivered one sets the endpoint's
-- ``delivered_at``. Returns the size of the tenant's index.
local now, retention, did = ARGV[1], ARGV[2], ARGV[3]
redis.call('HSETNX', KEYS[1], 'started_at', now)
local before = redis.call('HMGET', KEYS[1], 'state', 'started_at')
redis.call('HSET', KEYS[1], 'event_id', ARGV[4], 'endpoint_id', ARGV[5], 'event_name', ARGV[6], 'body', ARGV[7],
    'state', ARGV[8], 'updated_at', now, 'attempts', ARGV[9], 'last_result', ARGV[10],
    'last_latency_ms', ARGV[11], 'next_retry_at', ARGV[12], 'tenant', ARGV[18])
redis.call('RPUSH', KEYS[2], ARGV[13])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[14]), -1)
redis.call('EXPIRE', KEYS[1], retention)
redis.call('EXPIRE', KEYS[2], retention)
local oldest = '(' .. (tonumber(now) - tonumber(retention))
for _, index in ipairs({KEYS[3], KEYS[4], KEYS[9]}) do
    redis.call('ZADD', index, 'NX', now, did)
    redis.call('ZREMRANGEBYSCORE', index, '-inf', oldest)
end
-- The kind's index is cut to the retention by the pending script, once per event; the event's
-- index holds one event's deliveries, so its time to live is enough.
redis.call('ZADD', KEYS[7], 'NX', now, did)
redis.call('ZADD', KEYS[8], 'NX', now, did)
local states = (#KEYS - 9) / 2
for i = 0, states - 1 do  -- the state indexes, the log's and the tenant's: in the new state's, out of the old
    local name = ARGV[19 + i]
    for _, index in ipairs({KEYS[10 + i], KEYS[10 + states + i]}) do
        if name == ARGV[8] then
            redis.call('ZADD', index, before[2], did)
            redis.call('ZREMRANGEBYSCORE', index, '-inf', oldest)
            redis.call('EXPIRE', index, retention)
        elseif name == before[1] then
            redis.call('ZREM', index, did)
        end
    end
end
redis.call('EXPIRE', KEYS[4], retention)
redis.call('EXPIRE', KEYS[9], retention)
redis.call('EXPIRE', KEYS[8], retention)
redis.call('HSET', KEYS[5], 'state', ARGV[8], 'result', ARGV[10], 'at', now)
if ARGV[8] == 'delivered' then redis.call('HSET', KEYS[5], 'delivered_at', now) end
redis.call('EXPIRE', KEYS[5], retention)
redis.call('HINCRBY', KEYS[6], 'attempts', 1)
if ARGV[15] ~= '' then redis.call('HINCRBY', KEYS[6], ARGV[15], 1) end
if ARGV[17] ~= '' then redis.call('HINCRBY', KEYS[6], ARGV[17], 1) end
redis.call('EXPIRE', KEYS[6], ARGV[16])
return redis.call('ZCARD', KEYS[9])
