-- The gate: for each delivery of a batch, in order, take an in-flight slot on its endpoint (and count it in the
-- endpoint's rate window), or say how long until one may be taken. One script, so that a batch to any mix of
-- endpoints costs one round trip and each endpoint's slots and window are read and changed atomically.
--
-- KEYS: five per endpoint (keys.py, state_keys): inflight, circuit, pace, rate, failing (unused here).
-- ARGV: now, lapse_at (when a slot taken now lapses), limit, circuit_timeouts, deadline, window, then three per
--       delivery: its endpoint's number (1-based, in KEYS), a slot id, its rate limit per second (0: none).
-- Returns per delivery {'send'}, or {why, seconds} with why 'cap', 'circuit' (the cap of an open circuit: one)
-- or 'rate': for a cap, the endpoint's pace or, if longer, how long its oldest slot has been held; for the rate
-- limit, how long until the oldest attempt in the window leaves it.
local now, lapse_at = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, circuit_timeouts = tonumber(ARGV[3]), tonumber(ARGV[4])
local deadline, window = tonumber(ARGV[5]), tonumber(ARGV[6])
local caps, paces, open = {}, {}, {}
local answers = {}
for i = 7, #ARGV, 3 do
  local number, slot, per_second = tonumber(ARGV[i]), ARGV[i + 1], tonumber(ARGV[i + 2])
  local base = (number - 1) * 5
  local inflight, rate = KEYS[base + 1], KEYS[base + 4]
  if caps[number] == nil then
    -- First sight of this endpoint in the batch: sweep what lapsed, and read its cap once.
    redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
    redis.call('ZREMRANGEBYSCORE', rate, '-inf', now - window)
    local pace = tonumber(redis.call('GET', KEYS[base + 3]) or '0')
    local cap = limit
    if pace > 0 then cap = math.max(limit, math.floor(limit * deadline / pace)) end
    open[number] = tonumber(redis.call('GET', KEYS[base + 2]) or '0') >= circuit_timeouts
    if open[number] then cap = 1 end
    caps[number], paces[number] = cap, pace
  end
  if redis.call('ZCARD', inflight) >= caps[number] then
    local oldest = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
    local held = now - (tonumber(oldest[2]) - (lapse_at - now))
    answers[#answers + 1] = {open[number] and 'circuit' or 'cap', tostring(math.max(paces[number], held))}
  elseif per_second > 0 and redis.call('ZCARD', rate) >= per_second then
    local oldest = redis.call('ZRANGE', rate, 0, 0, 'WITHSCORES')
    answers[#answers + 1] = {'rate', tostring(math.max(tonumber(oldest[2]) + window - now, 0.001))}
  else
    redis.call('ZADD', inflight, lapse_at, slot)
    redis.call('EXPIRE', inflight, math.ceil(lapse_at - now) + 1)
    if per_second > 0 then
      redis.call('ZADD', rate, now, slot)
      redis.call('EXPIRE', rate, math.ceil(window) + 1)
    end
    answers[#answers + 1] = {'send'}
  end
end
return answers
