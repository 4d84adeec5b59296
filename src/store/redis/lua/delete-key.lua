-- Deletes a sluice-issued key by id and tells the other replicas; returns its record, or nil.
-- KEYS: byId; ARGV: registry key prefix (ending in the hash tag, e.g. "sluice:{keys}:"), channel.
-- The derived keys share the registry's hash tag, so they live in the same Cluster slot.
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
