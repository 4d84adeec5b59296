/**
 * Whether this replica should get new traffic (`/readyz`), with what each dependency says. It
 * tells whether this replica can serve, not whether a shared dependency is up: not ready until the
 * store (and the relay's database) answered once since start, so a wrong address keeps a new Pod
 * out; an outage after that is reported (here, sluice_store_up, sluice_relay_db_up) but would take
 * every replica out at once while they still serve (docs/operations.md, Probes). Not ready either
 * while draining, or saturated: at the connection cap, lately at it, or lately out of descriptors
 * toward the relay. "Lately" keeps a saturated replica out for a while, so that a kubelet probing
 * between two floods of connections does not put it back at once and out again (flapping).
 */
import type { RelayKeySource } from '../auth/relay-db/source.js';
import type { StoreHealth } from '../store/health.js';
import type { Readiness } from './server.js';

export interface ReadinessDeps {
  storeKind: string;
  storeHealth: StoreHealth;
  relayKeys: RelayKeySource | null;
  draining: () => boolean;
  /** Client connections open now, and the most the public listener takes. */
  connections: () => { open: number; cap: number };
}

/** How long a saturation (a connection closed at the cap, descriptors short toward the relay) keeps the replica unready. */
const SATURATED_UNREADY_MS = 5000;

export class ReplicaReadiness {
  private outOfSocketsAt = -Infinity;
  private capReachedAt = -Infinity;

  constructor(private readonly d: ReadinessDeps) {}

  /** A relay connection could not be opened for want of descriptors. */
  outOfSockets(): void {
    this.outOfSocketsAt = performance.now();
  }

  /** A client connection was closed on arrival for the connection cap. */
  capReached(): void {
    this.capReachedAt = performance.now();
  }

  /** Why the replica should get no new traffic for now; null when nothing says so. */
  private saturation(): string | null {
    const { open, cap } = this.d.connections();
    const now = performance.now();
    if (open >= cap) return 'at the connection cap';
    if (now - this.capReachedAt < SATURATED_UNREADY_MS) return 'lately at the connection cap';
    if (now - this.outOfSocketsAt < SATURATED_UNREADY_MS) return 'out of sockets toward the relay';
    return null;
  }

  async check(): Promise<Readiness> {
    const { storeHealth, relayKeys } = this.d;
    await storeHealth.probe(); // the body says how the store is now (a PING, bounded by redis.commandTimeoutMs)
    const s = storeHealth.get();
    const checks: Record<string, unknown> = { store: { kind: this.d.storeKind, state: s.state, since: new Date(s.since).toISOString(), error: s.error } };
    const draining = this.d.draining();
    const full = this.saturation();
    let ready = !draining && full === null && s.state !== 'starting';
    if (relayKeys) {
      const h = relayKeys.health();
      checks.relayDb = { state: h.state, since: new Date(h.since).toISOString(), database: h.database, schema: h.schema, error: h.error };
      if (h.state === 'starting') ready = false;
    }
    if (draining) checks.draining = true;
    if (full !== null) checks.connections = full;
    return { ready, checks };
  }
}
