-- The state of each limit now, counting nothing. Unlike consume.lua there is no member:
-- ARGV[1] now (ms), then per key the same triple ('w', limit, windowMs or 'c', limit, resetAtMs).
-- Returns per key {used, retryAfterMs, resetMs}; retryAfterMs is 0 unless the limit is reached,
-- resetMs is 0 when nothing is counted.
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
