/**
 * The set-up the small bench tools share: the build compiled, the bench's own redis-server, the
 * relay stand-in, and every server started through `start` (given the relay's URL as
 * BENCH_UPSTREAM) stopped at the end along with Redis, whatever happens in between.
 */
import { spawnRedis, type SpawnedRedis } from '../../test/support/redis.js';
import { compile, startNodeServer, type Server, type StartOptions } from './proc.js';

export interface BenchSession {
  redis: SpawnedRedis;
  /** Every server started so far, the relay stand-in first. */
  servers: readonly Server[];
  start(name: string, script: string, opts?: StartOptions): Promise<Server>;
}

/** The relay profiles: the stand-in (relay.ts) or the minimal relay (minimal.ts). */
export type RelayProfile = 'standin' | 'minimal';
export const RELAY_SCRIPTS: Record<RelayProfile, string> = { standin: 'relay.ts', minimal: 'minimal.ts' };

/** BENCH_RELAY=minimal runs the small tools against the minimal relay instead of the stand-in. */
export function relayProfileFromEnv(): RelayProfile {
  const p = process.env.BENCH_RELAY ?? 'standin';
  if (p !== 'standin' && p !== 'minimal') throw new Error(`BENCH_RELAY must be standin or minimal, not ${p}`);
  return p;
}

export async function benchSession(run: (s: BenchSession) => Promise<void>, relayProfile: RelayProfile = relayProfileFromEnv()): Promise<void> {
  await compile();
  const redis = await spawnRedis();
  const servers: Server[] = [];
  try {
    const relay = await startNodeServer('relay', RELAY_SCRIPTS[relayProfile]);
    servers.push(relay);
    const upstream = `http://127.0.0.1:${relay.info.port as number}`;
    await run({
      redis,
      servers,
      async start(name, script, opts = {}) {
        const server = await startNodeServer(name, script, { ...opts, env: { BENCH_UPSTREAM: upstream, ...opts.env } });
        servers.push(server);
        return server;
      },
    });
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await redis.kill();
  }
}
