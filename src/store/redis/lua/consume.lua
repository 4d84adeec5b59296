-- Limit decisions: one round trip checks every limit of a call and counts it in all of them only
-- when all pass. Times come from the sidecar's clock (ARGV), never from Redis, so tests can move
-- time and replicas agree on the day.
--
-- One run takes a batch of such decisions, one after another, each as atomic as if it ran alone:
-- the per-call cost of a script (its command, its argument tables, its reply) is paid once per
-- batch instead of once per call (src/store/redis/decisions.ts). On a Cluster every batch holds one
-- decision, whose keys share a hash tag.
--
-- ARGV[1] the number of decisions (for whoever reads the command), ARGV[2] the number of shapes;
-- then per shape (the checks a decision makes, without their keys: the same for every call of one
-- limit, so sent once per run):
--   n (its number of checks), then per check a triple:
--     'w', limit, windowMs   -- rolling window kept as a sorted set of admission times
--     'c', limit, resetAtMs  -- counter that resets at a fixed instant (the day)
-- then one argument for all the decisions, each as `now member shape ` (now in ms, a unique member
-- without spaces, its shape 1-based): the client's cost is per argument, Lua's gmatch is cheap.
-- KEYS: the n keys of each decision, in the same order.
-- Returns, per decision in turn, {rejectedBy (0 = admitted), retryAfterMs, used_1 .. used_n, resetMs_1 .. resetMs_n}.
-- A decision whose own data is bad (a key of the wrong type, a counter that is not a number or
-- would overflow) is {-1, message, 0 ..} of the same length, so it fails only its own call and not
-- the rest of its batch. A fault of Redis itself (READONLY after a failover, OOM, ...: SERVER_FAULTS)
-- ends the run with that error reply, as it did one call at a time, so that ioredis sees a failed
-- command; the decisions before it in the run stand, as a call that timed out may have.
--
-- DAY_KEY_GRACE_MS and EVIDENCE_MARGIN_MS are defined above this file's text when it is loaded
-- (src/store/redis/scripts.ts).
-- Errors that say Redis cannot take writes now, not that this call's data is bad.
local SERVER_FAULTS = { READONLY = true, OOM = true, NOREPLICAS = true, MASTERDOWN = true, MISCONF = true,
  LOADING = true, BUSY = true, CLUSTERDOWN = true, TRYAGAIN = true, NOPERM = true }
local out = {}
local kinds, limits, params = {}, {}, {}
local keys, used = {}, {}
-- Milliseconds until check j is empty again (its oldest call in the window leaves / the counter resets).
local function resetOf(j, now)
  if kinds[j] == 'w' then
    local first = redis.call('ZRANGEBYSCORE', keys[j], '(' .. (now - params[j]), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if first[2] then return tonumber(first[2]) + params[j] - now end
    return 0
  end
  return params[j] - now
end
-- One decision's reply: {rejectedBy, retryAfterMs, used_1 .. used_n, resetMs_1 .. resetMs_n}.
local function decide(now, member, n)
  for i = 1, n do
    if kinds[i] == 'w' then
      -- Calls are trimmed EVIDENCE_MARGIN_MS after they leave this decision's window, and counted
      -- only while in it: a replica whose clock reads a little later (or which read it a little
      -- later) must not take from the window calls that a decision of another still counts.
      redis.call('ZREMRANGEBYSCORE', keys[i], '-inf', now - params[i] - EVIDENCE_MARGIN_MS)
      used[i] = redis.call('ZCOUNT', keys[i], '(' .. (now - params[i]), '+inf')
    else
      used[i] = tonumber(redis.call('GET', keys[i]) or '0')
    end
  end
  local rejected, retry = 0, 0
  for i = 1, n do
    if used[i] >= limits[i] then
      if kinds[i] == 'w' then
        local e = redis.call('ZRANGEBYSCORE', keys[i], '(' .. (now - params[i]), '+inf', 'WITHSCORES', 'LIMIT', used[i] - limits[i], 1)
        retry = tonumber(e[2]) + params[i] - now
      else
        retry = params[i] - now
      end
      rejected = i
      break
    end
  end
  if rejected == 0 then
    for i = 1, n do
      if kinds[i] == 'w' then
        redis.call('ZADD', keys[i], now, member)
        redis.call('PEXPIRE', keys[i], params[i] + EVIDENCE_MARGIN_MS)
      else
        -- The key names the day, so its expiry, set once when the key is made, only bounds memory.
        -- DAY_KEY_GRACE_MS (27 hours) past this day's end: a reload to another time zone can end
        -- "the same" day up to 26 hours later, and the count must not vanish before then.
        if redis.call('INCR', keys[i]) == 1 then
          redis.call('PEXPIRE', keys[i], math.max(params[i] - now, 0) + DAY_KEY_GRACE_MS)
        end
      end
      used[i] = used[i] + 1
    end
  end
  local r = {rejected, retry}
  for i = 1, n do r[2 + i] = used[i] end
  for i = 1, n do r[2 + n + i] = resetOf(i, now) end
  return r
end
local shapes = {}
local a = 3
for s = 1, tonumber(ARGV[2]) do
  local n = tonumber(ARGV[a])
  local sk, sl, sp = {}, {}, {}
  a = a + 1
  for i = 1, n do
    sk[i], sl[i], sp[i] = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
  end
  shapes[s] = { n, sk, sl, sp }
end
local k = 0
-- Each field up to a space, whatever it holds: a time may have a fraction (a test's clock).
for now, member, si in string.gmatch(ARGV[a], '(%S+) (%S+) (%S+)') do
  now = tonumber(now)
  local shape = shapes[tonumber(si)]
  local n = shape[1]
  kinds, limits, params = shape[2], shape[3], shape[4]
  for i = 1, n do keys[i] = KEYS[k + i] end
  k = k + n
  local ok, r = pcall(decide, now, member, n)
  if not ok then
    -- r is the error. redis.call's error reaches pcall as a string in Redis 7.0 ("WRONGTYPE ..."), as a table with
    -- an err field in others, and with a script-position prefix before 7.0; its first upper-case
    -- word is the error code either way.
    local msg = type(r) == 'table' and r.err or tostring(r)
    local code = string.match(msg, '(%u+) ')
    -- A fault of Redis itself ends the run with its own reply, as the command alone would have.
    if code and SERVER_FAULTS[code] then
      return redis.error_reply(string.sub(msg, (string.find(msg, code, 1, true))))
    end
    r = {-1, msg}
    for i = 1, 2 * n do r[2 + i] = 0 end
  end
  for i = 1, #r do out[#out + 1] = r[i] end
end
return out
