-- A tenant's subscribers to an event (RedisRegistry.subscribed), and their documents when there are at most
-- ARGV[2] of them, in one round trip: the index and the documents change together (MULTI/EXEC), so what is read
-- here agrees. The documents' keys are the prefix and an id from the index; they cannot be known before it is read.
-- KEYS: the tenant's set of the event's subscribers.
-- ARGV: the prefix of an endpoint's document key, the most subscribers whose documents are read.
-- Returns {ids, documents}: documents empty when there are more subscribers, else one per id (false: gone).
local ids = redis.call('SMEMBERS', KEYS[1])
local documents = {}
if #ids <= tonumber(ARGV[2]) then
    for n, id in ipairs(ids) do
        documents[n] = redis.call('GET', ARGV[1] .. id)
    end
end
return {ids, documents}
