-- Per-tenant admission of delivery batches (pipeline/admission.py): at most `limit` batches of a tenant
-- queued or running at once; the rest wait, in order, in the tenant's parked list.
-- ARGV[1] the operation (admit, release, back, tend), ARGV[2] now (Unix seconds), ARGV[3] limit,
-- ARGV[4] seconds after which a slot is taken for lost with its worker, ARGV[5] the key template of an
-- endpoint's line (endpoints/keys.py, KEY_LINE: '{id}' in it); the rest depends on the operation.
-- A parked entry is "<slot> <batch JSON>"; a slot is a running batch's token, scored by when it was admitted.
-- The tenants' set scores each tenant with running or parked batches by when it next needs a look: its
-- oldest slot's expiry, or now when it has parked batches and room.
local op, now, limit, stale = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local line_key = ARGV[5]
-- Parked batches a slot that comes free looks at, at the most, for one that is not lined (below).
local LOOK_AHEAD = 4

local function slot_of(entry)
  return string.sub(entry, 1, string.find(entry, ' ', 1, true) - 1)
end

local function scored(running, parked, tenants, tenant)
  local oldest = redis.call('ZRANGE', running, 0, 0, 'WITHSCORES')
  if redis.call('LLEN', parked) > 0 and redis.call('ZCARD', running) < limit then
    redis.call('ZADD', tenants, now, tenant)
  elseif oldest[2] then
    redis.call('ZADD', tenants, tonumber(oldest[2]) + stale, tenant)
  elseif redis.call('LLEN', parked) > 0 then
    redis.call('ZADD', tenants, now, tenant)
  else
    redis.call('ZREM', tenants, tenant)
  end
end

-- Whether every endpoint a parked batch goes to has a line still to come (the gate's: its deliveries over its
-- in-flight cap wait their places). Each delivery opens with '["<endpoint id>",' (a body's quotes are escaped).
local function lined(entry)
  local ends = {}
  for id in string.gmatch(entry, '%["([^"]*)",') do
    if ends[id] == nil then
      ends[id] = tonumber(redis.call('GET', (string.gsub(line_key, '{id}', function() return id end))) or '0')
      if ends[id] <= now then return false end
    end
  end
  return next(ends) ~= nil
end

-- Expire the slots older than `stale`, then admit parked batches while there is room, oldest first, except that
-- a batch whose endpoints all have a line goes behind the others (it would only join its line: the tenant's slot
-- serves a batch that can be sent now); LOOK_AHEAD at the most are passed over, then the oldest goes anyway.
local function fill(running, parked)
  redis.call('ZREMRANGEBYSCORE', running, '-inf', now - stale)
  local sent = {}
  local room = limit - redis.call('ZCARD', running)
  local looks = math.min(LOOK_AHEAD, redis.call('LLEN', parked))
  while room > 0 do
    local entry = redis.call('LPOP', parked)
    if not entry then break end
    if looks > 0 and lined(entry) then
      redis.call('RPUSH', parked, entry)
    else
      redis.call('ZADD', running, now, slot_of(entry))
      sent[#sent + 1] = entry
      room = room - 1
    end
    looks = looks - 1
  end
  return sent
end

if op == 'tend' then
  -- KEYS[1] the tenants' set; ARGV[6] the running key's template, ARGV[7] the parked one's, ARGV[8] most tenants.
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[8]))
  local out = {}
  for _, tenant in ipairs(due) do
    local running = string.gsub(ARGV[6], '{tenant}', function() return tenant end)
    local parked = string.gsub(ARGV[7], '{tenant}', function() return tenant end)
    for _, entry in ipairs(fill(running, parked)) do
      out[#out + 1] = tenant
      out[#out + 1] = entry
    end
    scored(running, parked, KEYS[1], tenant)
  end
  -- Last, when the next look is due: the earliest tenant's score (-1: none).
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  out[#out + 1] = first[2] or '-1'
  return out
end

-- KEYS[1] the tenant's running slots, KEYS[2] its parked list, KEYS[3] the tenants' set; ARGV[6] the tenant.
local running, parked, tenants, tenant = KEYS[1], KEYS[2], KEYS[3], ARGV[6]
if op == 'admit' then
  -- ARGV[7..] new entries: those parked before go first; a new one runs at once only when none waits.
  local sent = fill(running, parked)
  local room = limit - redis.call('ZCARD', running)
  local admitted = {}
  for i = 7, #ARGV do
    if room > 0 and redis.call('LLEN', parked) == 0 then
      redis.call('ZADD', running, now, slot_of(ARGV[i]))
      admitted[#admitted + 1] = i - 6
      room = room - 1
    else
      redis.call('RPUSH', parked, ARGV[i])
    end
  end
  scored(running, parked, tenants, tenant)
  return {sent, admitted}
elseif op == 'release' then
  -- ARGV[7] the slot of a batch that ended.
  redis.call('ZREM', running, ARGV[7])
  local sent = fill(running, parked)
  scored(running, parked, tenants, tenant)
  return sent
elseif op == 'back' then
  -- ARGV[7] '1' to park again, '0' to forget; ARGV[8..] entries admitted but not sent (the broker refused
  -- them, or the store failed before the fan-out knew): their slots are freed, and they are parked again at the
  -- head, in order, or forgotten, parked or not (a fan-out that is tried again makes them anew).
  for i = #ARGV, 8, -1 do
    redis.call('ZREM', running, slot_of(ARGV[i]))
    if ARGV[7] == '1' then
      redis.call('LPUSH', parked, ARGV[i])
    else
      redis.call('LREM', parked, 1, ARGV[i])
    end
  end
  scored(running, parked, tenants, tenant)
  return #ARGV - 7
end
return redis.error_reply('Unknown admission operation ' .. tostring(op))
