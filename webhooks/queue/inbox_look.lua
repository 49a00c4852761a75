-- How many events wait in the inbox and the milliseconds left on its lease (-2: none), in one step
-- (inbox.py: Inbox.look). KEYS: inbox, lease. An empty inbox costs one read.
local waiting = redis.call('LLEN', KEYS[1])
local lease = -2
if waiting > 0 then
    lease = redis.call('PTTL', KEYS[2])
end
return {waiting, lease}
