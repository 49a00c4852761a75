-- The bookkeeping after a batch's attempts, one script for the whole batch: slots given back, circuits, runs of
-- failures and paces, each read-and-change atomic (another worker's attempt on the same endpoint may end a run
-- at any moment, and must not fall between the writes and the read of this one).
--
-- KEYS: six per endpoint (keys.py, state_keys): inflight, circuit, pace, rate, failing, line (unused here); then
--       one per tenant: the rate window of a tenant with a cap.
-- ARGV: how long a pace is kept (seconds), the number of endpoints, then two per endpoint: the mean time its
--       attempts took and the share of its pace they replace ('' both when it made no attempt), then five per
--       delivery given back: its endpoint's number (1-based, in KEYS), its slot ('' when
--       it had none), the circuit's change ('t' a time-out, 'a' an answer, '-' neither, '' not attempted: its
--       rate-window counts are given back too), its run's ('end' a success, the epoch seconds of a failure, ''
--       none) and its tenant's number (1-based, after the endpoints' keys; 0: its tenant's window did not count it).
-- Returns per delivery {failures, since}: for a failure the run with it counted, for a success the run it ended
-- ({0, 0}: there was none), else {0, 0}.
local kept = ARGV[1]
local endpoints = tonumber(ARGV[2])
local answers = {}
for i = 3 + endpoints * 2, #ARGV, 5 do
  local base = (tonumber(ARGV[i]) - 1) * 6
  local slot, circuit, run, tenant = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  local failing = KEYS[base + 5]
  if slot ~= '' then
    redis.call('ZREM', KEYS[base + 1], slot)
    if circuit == '' then
      redis.call('ZREM', KEYS[base + 4], slot)
      if tenant > 0 then redis.call('ZREM', KEYS[endpoints * 6 + tenant], slot) end
    end
  end
  if circuit == 't' then
    redis.call('INCR', KEYS[base + 2])
  elseif circuit == 'a' then
    redis.call('DEL', KEYS[base + 2])
  end
  local answer = {0, '0'}
  if run == 'end' then
    local failures = redis.call('HGET', failing, 'failures')
    if failures then
      redis.call('DEL', failing)
      answer = {tonumber(failures), '0'}
    end
  elseif run ~= '' then
    redis.call('HSETNX', failing, 'since', run)
    answer = {redis.call('HINCRBY', failing, 'failures', 1), redis.call('HGET', failing, 'since')}
  end
  answers[#answers + 1] = answer
end
for n = 1, endpoints do
  local took, share = tonumber(ARGV[1 + n * 2]), tonumber(ARGV[2 + n * 2])
  if took then
    local key = KEYS[(n - 1) * 6 + 3]
    local pace = tonumber(redis.call('GET', key) or '')
    if pace then took = pace + (took - pace) * share end
    redis.call('SET', key, tostring(took), 'EX', kept)
  end
end
return answers
