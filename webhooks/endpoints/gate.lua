-- The gate: for each delivery of a batch, in order, take an in-flight slot on its endpoint (and count it in the
-- endpoint's rate window and its tenant's), or say how long until one may be taken. One script, so that a batch
-- to any mix of endpoints and tenants costs one round trip and each window is read and changed atomically.
--
-- KEYS: six per endpoint (keys.py, state_keys): inflight, circuit, pace, rate, failing (unused here), line; then
--       two per tenant: its record (JSON, its rate_limit_per_second read here, so the batch stays one round trip)
--       and its rate window.
-- ARGV: now, lapse_at (when a slot taken now lapses), limit, circuit_timeouts, deadline, window, the number of
--       endpoints, min_wait, then four per delivery: its endpoint's number (1-based, in KEYS), a slot id, its rate
--       limit per second (0: none) and its tenant's number (1-based, after the endpoints' keys; 0: none, never
--       capped).
-- Returns per delivery {'send', counted} (counted: '1' when its tenant's window counted it), or {why, seconds}
-- with why 'cap', 'circuit' (the cap of an open circuit: one), 'rate' or 'tenant'. For a cap, the seconds until
-- its place in the endpoint's line (below); for a circuit, the endpoint's pace or, if longer, how long its oldest
-- slot has been held; for a rate limit (the endpoint's, or its tenant's), how long until the oldest attempt in
-- the window leaves it (for a tenant's, plus a window for each per_second of its deliveries this batch refused
-- before).
--
-- The line: a slot comes free about every pace / cap seconds, so the n-th delivery told to wait is told to come
-- back n of those after the first slot is due to come free (the oldest slot's start plus the pace), and finds one
-- free then, instead of asking again and again. While no pace is known, the time the oldest slot has run so far
-- stands for it (and the first comes back as long again: a backoff). The line's end is kept (KEYS line) so that
-- the next batch, on any worker, queues behind it. A place further than the deadline away is not taken: that
-- delivery asks again after the deadline and queues then.
local now, lapse_at = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, circuit_timeouts = tonumber(ARGV[3]), tonumber(ARGV[4])
local deadline, window = tonumber(ARGV[5]), tonumber(ARGV[6])
local tenant_base, min_wait = tonumber(ARGV[7]) * 6, tonumber(ARGV[8])
local caps, paces, open, swept, behind, tenant_caps, lines = {}, {}, {}, {}, {}, {}, {}
local answers = {}

-- A tenant's cap from its record: 0 when it has none (no record, no limit, a record that cannot be read).
local function tenant_cap(tenant)
  if tenant_caps[tenant] == nil then
    local raw = redis.call('GET', KEYS[tenant_base + (tenant - 1) * 2 + 1])
    local ok, record = pcall(cjson.decode, raw or 'null')
    local cap = ok and type(record) == 'table' and tonumber(record['rate_limit_per_second']) or 0
    tenant_caps[tenant] = cap
  end
  return tenant_caps[tenant]
end

-- Seconds until the place in endpoint `number`'s line of one more delivery over its cap, whose oldest slot has
-- been held `held` seconds; the line moves on by one place unless that is beyond the deadline.
local function place_in_line(number, held)
  local pace = paces[number]
  local each = pace > 0 and pace or math.max(held, min_wait)
  local first = pace > 0 and pace - held or held
  if lines[number] == nil then
    lines[number] = tonumber(redis.call('GET', KEYS[(number - 1) * 6 + 6]) or '0')
  end
  local place = math.max(lines[number], now + math.max(first, min_wait))
  if place - now > deadline then return deadline end
  lines[number] = place + each / caps[number]
  return place - now
end

local function until_room(key)
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tostring(math.max(tonumber(oldest[2]) + window - now, 0.001))
end

for i = 9, #ARGV, 4 do
  local number, slot, per_second = tonumber(ARGV[i]), ARGV[i + 1], tonumber(ARGV[i + 2])
  local tenant = tonumber(ARGV[i + 3])
  local tenant_per_second = tenant > 0 and tenant_cap(tenant) or 0
  local base = (number - 1) * 6
  local inflight, rate = KEYS[base + 1], KEYS[base + 4]
  local tenant_rate = tenant_per_second > 0 and KEYS[tenant_base + tenant * 2] or nil
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
  if tenant_rate and not swept[tenant] then
    redis.call('ZREMRANGEBYSCORE', tenant_rate, '-inf', now - window)
    swept[tenant] = true
  end
  if redis.call('ZCARD', inflight) >= caps[number] then
    local oldest = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
    local held = now - (tonumber(oldest[2]) - (lapse_at - now))
    if open[number] then
      answers[#answers + 1] = {'circuit', tostring(math.max(paces[number], held))}
    else
      answers[#answers + 1] = {'cap', tostring(place_in_line(number, held))}
    end
  elseif per_second > 0 and redis.call('ZCARD', rate) >= per_second then
    answers[#answers + 1] = {'rate', until_room(rate)}
  elseif tenant_rate and redis.call('ZCARD', tenant_rate) >= tenant_per_second then
    -- Those of the batch refused before it go first: each later second admits the next per_second of them, so a
    -- tenant's backlog comes back spread over the seconds it can be sent in, not all at once.
    local ahead = behind[tenant] or 0
    behind[tenant] = ahead + 1
    local wait = tonumber(until_room(tenant_rate)) + math.floor(ahead / tenant_per_second) * window
    answers[#answers + 1] = {'tenant', tostring(wait)}
  else
    redis.call('ZADD', inflight, lapse_at, slot)
    redis.call('EXPIRE', inflight, math.ceil(lapse_at - now) + 1)
    if per_second > 0 then
      redis.call('ZADD', rate, now, slot)
      redis.call('EXPIRE', rate, math.ceil(window) + 1)
    end
    local counted = '0'
    if tenant_rate then
      redis.call('ZADD', tenant_rate, now, slot)
      redis.call('EXPIRE', tenant_rate, math.ceil(window) + 1)
      counted = '1'
    end
    answers[#answers + 1] = {'send', counted}
  end
end
for number, line in pairs(lines) do
  if line > now then
    redis.call('SET', KEYS[(number - 1) * 6 + 6], tostring(line), 'EX', math.ceil(line - now) + 1)
  end
end
return answers
