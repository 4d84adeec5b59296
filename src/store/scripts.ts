/**
 * How long a day counter outlives the end of its day (27 h). The key names the day, so this
 * only bounds memory; but a reload to another time zone can end "the same" day up to 26 h
 * later, and the count must not vanish before then. Both stores use it: CONSUME_LUA as the
 * key's expiry past the day's end, the memory store as the point its reads stop seeing a count.
 */
export const DAY_KEY_GRACE_MS = 27 * 3_600_000;

/**
 * Lua run inside Redis so that one round trip checks every limit of a call
 * and counts it in all of them only when all pass. All keys of one call share
 * a Cluster hash tag. Times come from the sidecar's clock (ARGV), never from
 * Redis, so tests can move time and replicas agree on the day.
 *
 * ARGV[1] now (ms), ARGV[2] unique member, then per key a triple:
 *   'w', limit, windowMs   -- rolling window kept as a sorted set of admission times
 *   'c', limit, resetAtMs  -- counter that resets at a fixed instant (the day)
 * Returns {rejectedBy (0 = admitted), retryAfterMs, used_1 .. used_n, resetMs_1 .. resetMs_n}.
 */
export const CONSUME_LUA = `
local now = tonumber(ARGV[1])
local member = ARGV[2]
local n = #KEYS
local used = {}
-- Milliseconds until check j is empty again (its oldest call leaves / the counter resets).
local function resetOf(j)
  local b = 2 + (j - 1) * 3
  local param = tonumber(ARGV[b + 3])
  if ARGV[b + 1] == 'w' then
    local first = redis.call('ZRANGE', KEYS[j], 0, 0, 'WITHSCORES')
    if first[2] then return tonumber(first[2]) + param - now end
    return 0
  end
  return param - now
end
for i = 1, n do
  local b = 2 + (i - 1) * 3
  if ARGV[b + 1] == 'w' then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - tonumber(ARGV[b + 3]))
    used[i] = redis.call('ZCARD', KEYS[i])
  else
    used[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  end
end
for i = 1, n do
  local b = 2 + (i - 1) * 3
  local limit = tonumber(ARGV[b + 2])
  local param = tonumber(ARGV[b + 3])
  if used[i] >= limit then
    local retry
    if ARGV[b + 1] == 'w' then
      local e = redis.call('ZRANGE', KEYS[i], used[i] - limit, used[i] - limit, 'WITHSCORES')
      retry = tonumber(e[2]) + param - now
    else
      retry = param - now
    end
    local out = {i, retry}
    for j = 1, n do out[j + 2] = used[j] end
    for j = 1, n do out[n + j + 2] = resetOf(j) end
    return out
  end
end
local out = {0, 0}
for i = 1, n do
  local b = 2 + (i - 1) * 3
  local param = tonumber(ARGV[b + 3])
  if ARGV[b + 1] == 'w' then
    redis.call('ZADD', KEYS[i], now, member)
    redis.call('PEXPIRE', KEYS[i], param)
  else
    -- The key names the day, so its expiry, set once when the key is made, only bounds memory.
    -- DAY_KEY_GRACE_MS (27 hours) past this day's end: a reload to another time zone can end
    -- "the same" day up to 26 hours later, and the count must not vanish before then.
    if redis.call('INCR', KEYS[i]) == 1 then
      redis.call('PEXPIRE', KEYS[i], math.max(param - now, 0) + ${DAY_KEY_GRACE_MS})
    end
  end
  out[i + 2] = used[i] + 1
end
for j = 1, n do out[n + j + 2] = resetOf(j) end
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
