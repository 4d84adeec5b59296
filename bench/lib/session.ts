/**
 * What a scenario runs against, stopped at its end whatever happens: the bench's own redis-server,
 * the relays (each started on first use), the bench servers and the sluices it starts.
 */
import { spawnRedis, type SpawnedRedis } from '../../test/support/redis.js';
import { startNodeServer, type Server, type StartOptions } from './proc.js';
import { startSluice, type SluiceOptions, type SluiceServer } from './sluice.js';

/**
 * The relay profiles: the stand-in (bench/servers/relay.ts: new-api's answers and streams) and the
 * minimal relay (bench/servers/minimal.ts: a bare Node server answering 263 bytes), before which
 * what a proxy costs the relay shows plainly.
 */
export type RelayProfile = 'standin' | 'minimal';
export const RELAY_PROFILES: readonly RelayProfile[] = ['standin', 'minimal'];
const RELAY_SCRIPTS: Record<RelayProfile, string> = { standin: 'relay.ts', minimal: 'minimal.ts' };
export const RELAY_NAMES: Record<RelayProfile, string> = { standin: 'relay stand-in', minimal: 'minimal relay' };

export class Session {
  private readonly servers: Server[] = [];
  private readonly relays = new Map<RelayProfile, Server>();

  private constructor(readonly redis: SpawnedRedis) {}

  static async open(): Promise<Session> {
    return new Session(await spawnRedis());
  }

  async relay(profile: RelayProfile): Promise<Server> {
    let r = this.relays.get(profile);
    if (!r) {
      r = this.track(await startNodeServer(`relay-${profile}`, RELAY_SCRIPTS[profile]));
      this.relays.set(profile, r);
    }
    return r;
  }

  async upstream(profile: RelayProfile): Promise<string> {
    return `http://127.0.0.1:${(await this.relay(profile)).port}`;
  }

  /** A bench server (bench/servers/<script>) before `profile`'s relay. */
  async server(name: string, script: string, profile: RelayProfile, opts: StartOptions = {}): Promise<Server> {
    const upstream = await this.upstream(profile);
    return this.track(await startNodeServer(name, script, { ...opts, env: { BENCH_UPSTREAM: upstream, ...opts.env } }));
  }

  /** sluice before `profile`'s relay, on the bench Redis unless `redisUrl` is given as undefined. */
  async sluice(profile: RelayProfile, o: Omit<SluiceOptions, 'upstream'>): Promise<SluiceServer> {
    const opts: SluiceOptions = { redisUrl: this.redis.url, ...o, upstream: await this.upstream(profile) };
    return this.track(await startSluice(opts));
  }

  /** Stops one server early (its memory or descriptors would weigh on what follows). */
  async stop(s: Server): Promise<void> {
    const i = this.servers.indexOf(s);
    if (i !== -1) this.servers.splice(i, 1);
    await s.stop();
  }

  /** Every process of the session, for telling its CPU from other load on the machine. */
  pids(): number[] {
    return [...this.servers.map((s) => s.pid), this.redis.pid];
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop().catch(() => {})));
    await this.redis.kill().catch(() => {});
  }

  private track<S extends Server>(s: S): S {
    this.servers.push(s);
    return s;
  }
}

export async function withSession<T>(fn: (s: Session) => Promise<T>): Promise<T> {
  const s = await Session.open();
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

export function parseRelay(v: string | undefined, allowBoth: true): RelayProfile[];
export function parseRelay(v: string | undefined, allowBoth: false): RelayProfile;
export function parseRelay(v: string | undefined, allowBoth: boolean): RelayProfile | RelayProfile[] {
  const p = v ?? (allowBoth ? 'both' : 'standin');
  if (allowBoth && p === 'both') return [...RELAY_PROFILES];
  if (p !== 'standin' && p !== 'minimal') throw new Error(`--relay must be standin or minimal${allowBoth ? ' or both' : ''}, not ${p}`);
  return allowBoth ? [p] : p;
}
