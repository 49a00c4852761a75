-- The cap and a tenant's deletion (retention.py): a tenant's oldest (or all its) deliveries deleted with their
-- attempts and index entries in one command. KEYS: the shared indexes (all deliveries, the tenant's, each
-- state's, the tenant's of each state, each kind's), then for each delivery its hash, its attempts, its
-- endpoint's index and its event's index. ARGV: how many shared indexes, then the
-- delivery ids.
local shared = tonumber(ARGV[1])
for i = 2, #ARGV do
    local at = shared + (i - 2) * 4
    redis.call('DEL', KEYS[at + 1], KEYS[at + 2])
    redis.call('ZREM', KEYS[at + 3], ARGV[i])
    redis.call('ZREM', KEYS[at + 4], ARGV[i])
end
for first = 2, #ARGV, 1000 do  -- unpack takes a few thousand values at most
    local last = math.min(first + 999, #ARGV)
    for i = 1, shared do
        redis.call('ZREM', KEYS[i], unpack(ARGV, first, last))
    end
end
