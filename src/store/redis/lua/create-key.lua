-- Registers a sluice-issued key and tells the other replicas.
-- KEYS: byHash, byId, userSet; ARGV: id, user, name, createdAt, hash, channel.
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'user', ARGV[2], 'name', ARGV[3], 'createdAt', ARGV[4], 'hash', ARGV[5])
redis.call('SET', KEYS[2], ARGV[5])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PUBLISH', ARGV[6], 'created:' .. ARGV[5])
return 1
