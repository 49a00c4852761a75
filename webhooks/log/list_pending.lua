-- DeliveryLog.enqueued for one event (writes.py): one command, and the body sent once, however many
-- endpoints. KEYS: the index of all deliveries, the event kind's index, the pending state's index, the event
-- id's index, the tenant's index, the tenant's pending index, then n delivery hashes, then their n endpoint
-- indexes. ARGV: now, retention, event id, event name, body, the pending state, the tenant, then the n
-- delivery ids and the n endpoint ids. An existing state and start time are kept (a fan-out run again after
-- a worker was lost must not reset deliveries already attempted). The shared indexes take all of the event's
-- deliveries in a few ZADDs, not one each.
local shared = 6
local n = (#KEYS - shared) / 2
local now, retention, tenant = ARGV[1], ARGV[2], ARGV[7]
local oldest = '(' .. (tonumber(now) - tonumber(retention))
local listed, pending = {}, {}
for i = 1, n do
    local key, did, endpoint = KEYS[shared + i], ARGV[7 + i], ARGV[7 + n + i]
    if redis.call('EXISTS', key) == 0 then
        redis.call('HSET', key, 'event_id', ARGV[3], 'endpoint_id', endpoint, 'event_name', ARGV[4], 'body', ARGV[5],
            'state', ARGV[6], 'started_at', now, 'tenant', tenant)
        pending[#pending + 1] = now
        pending[#pending + 1] = did
    else
        redis.call('HSET', key, 'event_id', ARGV[3], 'endpoint_id', endpoint, 'event_name', ARGV[4], 'body', ARGV[5],
            'tenant', tenant)
        if redis.call('HSETNX', key, 'state', ARGV[6]) == 1 then
            redis.call('ZADD', KEYS[3], now, did)
            redis.call('ZADD', KEYS[6], now, did)
        end
        redis.call('HSETNX', key, 'started_at', now)
    end
    redis.call('EXPIRE', key, retention)
    redis.call('ZADD', KEYS[shared + n + i], 'NX', now, did)
    listed[#listed + 1] = now
    listed[#listed + 1] = did
end
-- The shared indexes take their members a thousand at a time (unpack takes a few thousand values at most).
for first = 1, #listed, 2000 do
    local last = math.min(first + 1999, #listed)
    for _, index in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5]}) do
        redis.call('ZADD', index, 'NX', unpack(listed, first, last))
    end
end
for first = 1, #pending, 2000 do
    local last = math.min(first + 1999, #pending)
    redis.call('ZADD', KEYS[3], unpack(pending, first, last))
    redis.call('ZADD', KEYS[6], unpack(pending, first, last))
end
for i = 1, shared do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', oldest)
    if i > 1 then redis.call('EXPIRE', KEYS[i], retention) end
end
