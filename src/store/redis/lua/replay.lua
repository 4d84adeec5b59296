-- Adds calls admitted during an outage (by one replica, in memory) to the shared counts, each at
-- its own time, so that windows and the day come out as if Redis had taken every decision.
-- Idempotent per call: a call is recognised by its member, in any of its windows (where its own
-- decision, had it run after all, or an earlier replay put it) or in the `:replayed` hash beside
-- each of its counters (where a replay records it).
--
-- ARGV[1] now (ms), ARGV[2] the number of shapes, then the shapes as consume.lua takes them
-- (n, then n triples), then one argument holding each call as `time member shape flag ` (flag
-- `m`: its decision may have run, `n`: it was never sent). KEYS: per call, the key of its
-- subject's last reset time (limit-resets.ts), then per check its key and, for a counter, the key
-- of its `:replayed` hash right after.
-- Returns one code per call: 1 replayed, 2 already counted, 3 expired (nothing left to count),
-- 4 unknown (it may have run and its windows no longer tell: not added), 5 its subject's limits
-- were reset after it (not added), -1 its data is bad.
-- A fault of Redis itself (READONLY, OOM, ...) ends the run with that error, as in consume.lua:
-- the calls before it stand, and a retry finds them counted.
--
-- DAY_KEY_GRACE_MS and EVIDENCE_MARGIN_MS are defined above this file's text when it is loaded
-- (src/store/redis/scripts.ts).
local SERVER_FAULTS = { READONLY = true, OOM = true, NOREPLICAS = true, MASTERDOWN = true, MISCONF = true,
  LOADING = true, BUSY = true, CLUSTERDOWN = true, TRYAGAIN = true, NOPERM = true }
local now = tonumber(ARGV[1])
local kinds, params, keys, marks = {}, {}, {}, {}
local function replay(t, member, n, maybe, resetKey)
  local resetAt = tonumber(redis.call('GET', resetKey))
  if resetAt and t <= resetAt then return 5 end
  local due, live = false, false
  for i = 1, n do
    if kinds[i] == 'w' then
      if redis.call('ZSCORE', keys[i], member) then return 2 end
      local left = t + params[i] - now
      if left > 0 then due = true end
      if left > EVIDENCE_MARGIN_MS then live = true end
    else
      if redis.call('HEXISTS', marks[i], member) == 1 then return 2 end
      if params[i] > now then due = true end
    end
  end
  if not due then return 3 end
  -- Its decision may have run: only a window that still holds what it would have added can say it did not.
  if maybe and not live then return 4 end
  for i = 1, n do
    if kinds[i] == 'w' then
      local left = t + params[i] - now
      if left > 0 then
        redis.call('ZADD', keys[i], t, member)
        -- As consume.lua: a window key outlives its newest call by the clocks' margin.
        if redis.call('PTTL', keys[i]) < left + EVIDENCE_MARGIN_MS then redis.call('PEXPIRE', keys[i], left + EVIDENCE_MARGIN_MS) end
      end
    elseif params[i] > now then
      -- As consume.lua: the key names the day; its expiry, set when it is made, only bounds memory.
      if redis.call('INCR', keys[i]) == 1 then
        redis.call('PEXPIRE', keys[i], params[i] - now + DAY_KEY_GRACE_MS)
      end
      redis.call('HSET', marks[i], member, 1)
      local ttl = redis.call('PTTL', keys[i])
      if ttl > 0 then redis.call('PEXPIRE', marks[i], ttl) end
    end
  end
  return 1
end
local shapes = {}
local a = 3
for s = 1, tonumber(ARGV[2]) do
  local n = tonumber(ARGV[a])
  local sk, sp = {}, {}
  a = a + 1
  for i = 1, n do
    sk[i], sp[i] = ARGV[a], tonumber(ARGV[a + 2])
    a = a + 3
  end
  shapes[s] = { n, sk, sp }
end
local out = {}
local k = 0
for t, member, si, flag in string.gmatch(ARGV[a], '(%S+) (%S+) (%S+) (%S+)') do
  local shape = shapes[tonumber(si)]
  local n = shape[1]
  kinds, params = shape[2], shape[3]
  k = k + 1
  local resetKey = KEYS[k]
  for i = 1, n do
    k = k + 1
    keys[i] = KEYS[k]
    if kinds[i] == 'c' then
      k = k + 1
      marks[i] = KEYS[k]
    end
  end
  local ok, r = pcall(replay, tonumber(t), member, n, flag == 'm', resetKey)
  if not ok then
    local msg = type(r) == 'table' and r.err or tostring(r)
    local code = string.match(msg, '(%u+) ')
    if code and SERVER_FAULTS[code] then
      return redis.error_reply(string.sub(msg, (string.find(msg, code, 1, true))))
    end
    r = -1
  end
  out[#out + 1] = r
end
return out
