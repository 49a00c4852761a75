-- One page of DeliveryLog.query (reads.py; the filters: queries.py), in one command.
-- KEYS: the index of every delivery, the filter indexes, an index to leave out (when ARGV[5] is 1), then a
-- scratch key. ARGV: the highest score, the lowest score, how many to skip, how many to return, 1 when an
-- index is left out, and the highest score of the whole result (the cursor's aside). With no filter the
-- range reads the first index directly; otherwise ZINTERSTORE (cost: the smallest index times the number
-- of indexes) keeps the first index's scores (weights 1, 0, 0...), ZDIFFSTORE takes out the index left
-- out, and the scratch key is deleted before the script returns. Returns how many match (all pages), how
-- many the log holds, then ids and scores, newest first.
local n = #KEYS
local without = ARGV[5] == '1'
local last = without and n - 2 or n - 1
local source = KEYS[1]
if last > 1 then
    local args = {'ZINTERSTORE', KEYS[n], last}
    for i = 1, last do args[#args + 1] = KEYS[i] end
    args[#args + 1] = 'WEIGHTS'
    args[#args + 1] = 1
    for i = 2, last do args[#args + 1] = 0 end
    redis.call(unpack(args))
    source = KEYS[n]
end
if without then
    redis.call('ZDIFFSTORE', KEYS[n], 2, source, KEYS[n - 1])
    source = KEYS[n]
end
local matching = redis.call('ZCOUNT', source, ARGV[2], ARGV[6])
local found = redis.call('ZREVRANGEBYSCORE', source, ARGV[1], ARGV[2], 'WITHSCORES', 'LIMIT', ARGV[3], ARGV[4])
if source == KEYS[n] then redis.call('DEL', KEYS[n]) end
return {matching, redis.call('ZCARD', KEYS[1]), found}
