/**
 * How long a day counter outlives the end of its day (27 h). The key names the day, so this
 * only bounds memory; but a reload to another time zone can end "the same" day up to 26 h
 * later, and the count must not vanish before then. Both stores use it: CONSUME_LUA as the
 * key's expiry past the day's end, the memory store as the point its reads stop seeing a count.
 */
export const DAY_KEY_GRACE_MS = 27 * 3_600_000;

/**
 * Lua run inside Redis so that one round trip checks every limit of a call
 * and counts it in all of them only when all pass. Times come from the
 * sidecar's clock (ARGV), never from Redis, so tests can move time and
 * replicas agree on the day.
 *
 * One script run takes a batch of such decisions, one after another, each as
 * atomic as if it ran alone: the per-call cost of a script (its command, its
 * argument tables, its reply) is paid once per batch instead of once per call.
 * On a Cluster every batch holds one decision, whose keys share a hash tag.
 *
 * ARGV[1] the number of decisions (for whoever reads the command), ARGV[2] the number of shapes;
 * then per shape (the checks a decision makes, without their keys: the same for every call of one
 * limit, so sent once per run):
 *   n (its number of checks), then per check a triple:
 *     'w', limit, windowMs   -- rolling window kept as a sorted set of admission times
 *     'c', limit, resetAtMs  -- counter that resets at a fixed instant (the day)
 * then one argument for all the decisions, each as `now member shape ` (now in ms, a unique member
 * without spaces, its shape 1-based): the client's cost is per argument, Lua's gmatch is cheap.
 * KEYS: the n keys of each decision, in the same order.
 * Returns, per decision in turn, {rejectedBy (0 = admitted), retryAfterMs, used_1 .. used_n, resetMs_1 .. resetMs_n}.
 * A decision whose own data is bad (a key of the wrong type, a counter that is not a number or
 * would overflow) is {-1, message, 0 ..} of the same length, so it fails only its own call and not
 * the rest of its batch. A fault of Redis itself (READONLY after a failover, OOM, ...: SERVER_FAULTS)
 * ends the run with that error reply, as it did one call at a time, so that ioredis sees a failed
 * command; the decisions before it in the run stand, as a call that timed out may have.
 */
export const CONSUME_LUA = `
-- Errors that say Redis cannot take writes now, not that this call's data is bad.
local SERVER_FAULTS = { READONLY = true, OOM = true, NOREPLICAS = true, MASTERDOWN = true, MISCONF = true,
  LOADING = true, BUSY = true, CLUSTERDOWN = true, TRYAGAIN = true, NOPERM = true }
local out = {}
local kinds, limits, params = {}, {}, {}
local keys, used = {}, {}
-- Milliseconds until check j is empty again (its oldest call leaves / the counter resets).
local function resetOf(j, now)
  if kinds[j] == 'w' then
    local first = redis.call('ZRANGE', keys[j], 0, 0, 'WITHSCORES')
    if first[2] then return tonumber(first[2]) + params[j] - now end
    return 0
  end
  return params[j] - now
end
-- One decision's reply: {rejectedBy, retryAfterMs, used_1 .. used_n, resetMs_1 .. resetMs_n}.
local function decide(now, member, n)
  for i = 1, n do
    if kinds[i] == 'w' then
      redis.call('ZREMRANGEBYSCORE', keys[i], '-inf', now - params[i])
      used[i] = redis.call('ZCARD', keys[i])
    else
      used[i] = tonumber(redis.call('GET', keys[i]) or '0')
    end
  end
  local rejected, retry = 0, 0
  for i = 1, n do
    if used[i] >= limits[i] then
      if kinds[i] == 'w' then
        local e = redis.call('ZRANGE', keys[i], used[i] - limits[i], used[i] - limits[i], 'WITHSCORES')
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
        redis.call('PEXPIRE', keys[i], params[i])
      else
        -- The key names the day, so its expiry, set once when the key is made, only bounds memory.
        -- DAY_KEY_GRACE_MS (27 hours) past this day's end: a reload to another time zone can end
        -- "the same" day up to 26 hours later, and the count must not vanish before then.
        if redis.call('INCR', keys[i]) == 1 then
          redis.call('PEXPIRE', keys[i], math.max(params[i] - now, 0) + ${DAY_KEY_GRACE_MS})
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
`;

/**
 * The state of each limit now, counting nothing. Unlike CONSUME_LUA there is no member:
 * ARGV[1] now (ms), then per key the same triple ('w', limit, windowMs or 'c', limit, resetAtMs).
 * Returns per key {used, retryAfterMs, resetMs}; retryAfterMs is 0 unless the limit is reached,
 * resetMs is 0 when nothing is counted.
 */
export const INSPECT_LUA = `
local now = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 3
  local limit = tonumber(ARGV[b + 2])
  local param = tonumber(ARGV[b + 3])
  local used, retry, reset = 0, 0, 0
  if ARGV[b + 1] == 'w' then
    local edge = now - param
    used = redis.call('ZCOUNT', KEYS[i], '(' .. edge, '+inf')
    if used > 0 then
      local first = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. edge, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      reset = tonumber(first[2]) + param - now
    end
    if used >= limit then
      local e = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. edge, '+inf', 'WITHSCORES', 'LIMIT', used - limit, 1)
      retry = tonumber(e[2]) + param - now
    end
  else
    used = tonumber(redis.call('GET', KEYS[i]) or '0')
    if used > 0 then reset = param - now end
    if used >= limit then retry = param - now end
  end
  out[#out + 1] = used
  out[#out + 1] = retry
  out[#out + 1] = reset
end
return out
`;

/**
 * How long before a window entry leaves its window it stops being trusted as evidence: a
 * replica whose clock runs this much ahead may already have trimmed it (REPLAY_LUA).
 */
export const EVIDENCE_MARGIN_MS = 2000;

/** The hash, beside a counter's key, of the members a replay has added to that counter. */
export const REPLAYED_SUFFIX = ':replayed';

/**
 * Adds calls admitted during an outage (by one replica, in memory) to the shared counts, each at
 * its own time, so that windows and the day come out as if Redis had taken every decision.
 * Idempotent per call: a call is recognised by its member, in any of its windows (where its own
 * decision, had it run after all, or an earlier replay put it) or in the `:replayed` hash beside
 * each of its counters (where a replay records it).
 *
 * ARGV[1] now (ms), ARGV[2] the number of shapes, then the shapes as CONSUME_LUA takes them
 * (n, then n triples), then one argument holding each call as `time member shape flag ` (flag
 * `m`: its decision may have run, `n`: it was never sent). KEYS: per call, per check, its key and,
 * for a counter, the key of its `:replayed` hash right after.
 * Returns one code per call: 1 replayed, 2 already counted, 3 expired (nothing left to count),
 * 4 unknown (it may have run and its windows no longer tell: not added), -1 its data is bad.
 * A fault of Redis itself (READONLY, OOM, ...) ends the run with that error, as in CONSUME_LUA:
 * the calls before it stand, and a retry finds them counted.
 */
export const REPLAY_LUA = `
local SERVER_FAULTS = { READONLY = true, OOM = true, NOREPLICAS = true, MASTERDOWN = true, MISCONF = true,
  LOADING = true, BUSY = true, CLUSTERDOWN = true, TRYAGAIN = true, NOPERM = true }
local now = tonumber(ARGV[1])
local kinds, params, keys, marks = {}, {}, {}, {}
local function replay(t, member, n, maybe)
  local due, live = false, false
  for i = 1, n do
    if kinds[i] == 'w' then
      if redis.call('ZSCORE', keys[i], member) then return 2 end
      local left = t + params[i] - now
      if left > 0 then due = true end
      if left > ${EVIDENCE_MARGIN_MS} then live = true end
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
        if redis.call('PTTL', keys[i]) < left then redis.call('PEXPIRE', keys[i], left) end
      end
    elseif params[i] > now then
      -- As CONSUME_LUA: the key names the day; its expiry, set when it is made, only bounds memory.
      if redis.call('INCR', keys[i]) == 1 then
        redis.call('PEXPIRE', keys[i], params[i] - now + ${DAY_KEY_GRACE_MS})
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
  for i = 1, n do
    k = k + 1
    keys[i] = KEYS[k]
    if kinds[i] == 'c' then
      k = k + 1
      marks[i] = KEYS[k]
    end
  end
  local ok, r = pcall(replay, tonumber(t), member, n, flag == 'm')
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
`;

/** KEYS: byHash, byId, userSet; ARGV: id, user, name, createdAt, hash, channel. */
export const CREATE_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'user', ARGV[2], 'name', ARGV[3], 'createdAt', ARGV[4], 'hash', ARGV[5])
redis.call('SET', KEYS[2], ARGV[5])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PUBLISH', ARGV[6], 'created:' .. ARGV[5])
return 1
`;

/**
 * KEYS: byId; ARGV: registry key prefix (ending in the hash tag, e.g. "sluice:{keys}:"), channel.
 * The derived keys share the registry's hash tag, so they live in the same Cluster slot.
 */
export const DELETE_KEY_LUA = `
local hash = redis.call('GET', KEYS[1])
if not hash then return false end
local hk = ARGV[1] .. 'h:' .. hash
local rec = redis.call('HGETALL', hk)
local user = nil
for i = 1, #rec, 2 do if rec[i] == 'user' then user = rec[i + 1] end end
redis.call('DEL', hk, KEYS[1])
if user then redis.call('SREM', ARGV[1] .. 'u:' .. user, string.sub(KEYS[1], #ARGV[1] + 4)) end
redis.call('PUBLISH', ARGV[2], 'deleted:' .. hash)
return rec
`;
