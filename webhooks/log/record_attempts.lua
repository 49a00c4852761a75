-- DeliveryLog.record_attempts (writes.py): a batch's attempts, whatever each was, in one command; what is the
-- same for all of them comes once.
-- KEYS: the index of all deliveries, the index of each state; per tenant, its index then its index of each state
-- (in the same order); then seven per attempt: the delivery hash, its attempts list, the endpoint's index, the
-- endpoint's last attempt, its counts for this hour, the event kind's index, the event id's index.
-- ARGV: retention, history kept, the counters' time to live, the number of tenants, the number of states, the
-- name of each state (in the order of their indexes), the number of states the cap counts and their names
-- (retention.EVICTABLE), each tenant's name; then fifteen per attempt: its tenant's
-- number (from 1), now, delivery id, event id, endpoint id, event name, body, state, attempt number, last
-- result, latency, next retry ("" for none), the attempt as JSON, the delivery counter to increment
-- (``health.counted_as``; "" for none), and the latency bucket to increment ("" without a response).
-- Every attempt increments the hour's ``attempts``; a delivered one sets the endpoint's ``delivered_at``.
-- Returns how many finished (or held) deliveries each tenant has, in the tenants' order: what its cap counts.
local retention, history, counted_for = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local tenants, states = tonumber(ARGV[4]), tonumber(ARGV[5])
local per_tenant = 1 + states
local function tenant_key(t) return 2 + states + (t - 1) * per_tenant end  -- its index; its states' follow
local evictable, counted = {}, tonumber(ARGV[6 + states])
for i = 1, counted do evictable[ARGV[6 + states + i]] = true end
local names_at = 6 + states + counted  -- tenant t's name is ARGV[names_at + t]
local first_key, first_arg = tenant_key(tenants + 1), names_at + tenants + 1
-- The indexes cut to the retention, and the keys given its time to live, once each after the attempts: the
-- shared ones are the same for every attempt, and cutting a large index costs a lookup each time.
local cut, live, latest = {}, {}, 0
for a = 0, (#ARGV - first_arg + 1) / 15 - 1 do
    local k, v = first_key + a * 7, first_arg + a * 15
    local tenant = tonumber(ARGV[v])
    local t = tenant_key(tenant)
    local now, did, state = ARGV[v + 1], ARGV[v + 2], ARGV[v + 7]
    latest = math.max(latest, tonumber(now))
    redis.call('HSETNX', KEYS[k], 'started_at', now)
    local before = redis.call('HMGET', KEYS[k], 'state', 'started_at')
    redis.call('HSET', KEYS[k], 'event_id', ARGV[v + 3], 'endpoint_id', ARGV[v + 4], 'event_name', ARGV[v + 5],
        'body', ARGV[v + 6], 'state', state, 'updated_at', now, 'attempts', ARGV[v + 8], 'last_result', ARGV[v + 9],
        'last_latency_ms', ARGV[v + 10], 'next_retry_at', ARGV[v + 11], 'tenant', ARGV[names_at + tenant])
    redis.call('RPUSH', KEYS[k + 1], ARGV[v + 12])
    redis.call('LTRIM', KEYS[k + 1], -history, -1)
    redis.call('EXPIRE', KEYS[k], retention)
    redis.call('EXPIRE', KEYS[k + 1], retention)
    for _, index in ipairs({KEYS[1], KEYS[k + 2], KEYS[t]}) do
        redis.call('ZADD', index, 'NX', now, did)
        cut[index] = true
    end
    -- The kind's index is cut to the retention by the pending script, once per event; the event's
    -- index holds one event's deliveries, so its time to live is enough.
    redis.call('ZADD', KEYS[k + 5], 'NX', now, did)
    redis.call('ZADD', KEYS[k + 6], 'NX', now, did)
    for i = 1, states do  -- the state indexes, the log's and the tenant's: in the new state's, out of the old
        local name = ARGV[5 + i]
        for _, index in ipairs({KEYS[1 + i], KEYS[t + i]}) do
            if name == state then
                redis.call('ZADD', index, before[2], did)
                cut[index], live[index] = true, true
            elseif name == before[1] then
                redis.call('ZREM', index, did)
            end
        end
    end
    live[KEYS[k + 2]], live[KEYS[t]], live[KEYS[k + 6]] = true, true, true
    redis.call('HSET', KEYS[k + 3], 'state', state, 'result', ARGV[v + 9], 'at', now)
    if state == 'delivered' then redis.call('HSET', KEYS[k + 3], 'delivered_at', now) end
    redis.call('EXPIRE', KEYS[k + 3], retention)
    redis.call('HINCRBY', KEYS[k + 4], 'attempts', 1)
    if ARGV[v + 13] ~= '' then redis.call('HINCRBY', KEYS[k + 4], ARGV[v + 13], 1) end
    if ARGV[v + 14] ~= '' then redis.call('HINCRBY', KEYS[k + 4], ARGV[v + 14], 1) end
    redis.call('EXPIRE', KEYS[k + 4], counted_for)
end
local oldest = '(' .. (latest - tonumber(retention))
for index in pairs(cut) do redis.call('ZREMRANGEBYSCORE', index, '-inf', oldest) end
for key in pairs(live) do redis.call('EXPIRE', key, retention) end
local finished = {}  -- each tenant's deliveries in the states the cap counts
for t = 1, tenants do
    local index, count = tenant_key(t), 0
    for i = 1, states do
        if evictable[ARGV[5 + i]] then count = count + redis.call('ZCARD', KEYS[index + i]) end
    end
    finished[t] = count
end
return finished
