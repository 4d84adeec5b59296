/**
 * Gives memory back once traffic has come and gone. sluice runs with V8's memory reducer off
 * (src/runtime/node-flags.ts): a full collection before the request path has served a few hundred
 * requests leaves the process slower for good, and the reducer runs one in every fresh, idle
 * process. Without it, what a burst took stays in use while the process idles. So this runs a full
 * collection when the process has served enough requests, then gone quiet with nothing in flight,
 * and holds a heap worth giving back (MIN_HEAP_BYTES). A collection after traffic does not leave the
 * process slow for good, but the first seconds of traffic after it cost more CPU per request: an
 * ordinary working set (tens of MB) is kept warm for the next traffic, and only what a
 * burst took (thousands of streams: hundreds of MB) is given back. docs/performance.md has the
 * measurements.
 */
import { getHeapStatistics } from 'node:v8';

/** Calls forwarded before a collection is allowed: well past the count after which one was measured harmless. */
const MIN_REQUESTS_BEFORE_COLLECTING = 1000;
/** How long no request may arrive before the process counts as idle. */
const IDLE_MS = 30_000;
/** How often idleness is checked. */
const CHECK_EVERY_MS = 5_000;
/** The heap V8 holds (committed) below which a quiet process keeps it: an ordinary working set under load stays well below. */
export const MIN_HEAP_BYTES = 64 * 1024 * 1024;

export interface IdleCollectorOptions {
  /** Calls the relay answered since start (a count that only grows). */
  served: () => number;
  /**
   * Requests in flight now. An open stream counts as served only when it ends, and a full
   * collection with thousands of them open would hold their events back: never while any is open.
   */
  inflight: () => number;
  /** A full garbage collection (`globalThis.gc` under `--expose-gc`). */
  collect: () => void;
  /** The heap V8 holds now, in bytes (default: its committed size, `v8.getHeapStatistics().total_heap_size`). */
  heapBytes?: () => number;
  minRequests?: number;
  idleMs?: number;
  /** A collection only when `heapBytes()` is at least this (default MIN_HEAP_BYTES). */
  minHeapBytes?: number;
}

/** The collector's options and how often it checks (default CHECK_EVERY_MS). */
export interface IdleCollectionOptions extends IdleCollectorOptions {
  checkEveryMs?: number;
}

export class IdleCollector {
  private lastCount = 0;
  /** When the last check saw a new call or one in flight. */
  private quietSince = 0;
  /** `served` at the last collection: when it is unchanged, there is nothing new to give back. */
  private collectedAt = 0;
  private readonly minRequests: number;
  private readonly idleMs: number;
  private readonly minHeapBytes: number;
  private readonly heapBytes: () => number;

  constructor(private readonly opts: IdleCollectorOptions) {
    this.minRequests = opts.minRequests ?? MIN_REQUESTS_BEFORE_COLLECTING;
    this.idleMs = opts.idleMs ?? IDLE_MS;
    this.minHeapBytes = opts.minHeapBytes ?? MIN_HEAP_BYTES;
    this.heapBytes = opts.heapBytes ?? committedHeapBytes;
  }

  /** Called every CHECK_EVERY_MS; returns true when it collected. */
  tick(now: number): boolean {
    const count = this.opts.served();
    if (count !== this.lastCount || this.opts.inflight() > 0) {
      this.lastCount = count;
      this.quietSince = now;
      return false;
    }
    if (count === this.collectedAt || count < this.minRequests || now - this.quietSince < this.idleMs) return false;
    // A working set this small is kept for the next traffic (checked again at the next tick: it cannot grow while quiet).
    if (this.heapBytes() < this.minHeapBytes) return false;
    this.collectedAt = count;
    this.opts.collect();
    return true;
  }
}

/**
 * Checks every `checkEveryMs` (default CHECK_EVERY_MS) on an unref'd timer; `collected` hears of
 * each collection. Returns the stop.
 */
export function startIdleCollection(o: IdleCollectionOptions, now: () => number, collected: () => void): () => void {
  const idle = new IdleCollector(o);
  const timer = setInterval(() => {
    if (idle.tick(now())) collected();
  }, o.checkEveryMs ?? CHECK_EVERY_MS).unref();
  return () => clearInterval(timer);
}

/** The full collection Node exposes under `--expose-gc`, if it was started with it. */
export function exposedGc(): (() => void) | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === 'function' ? (gc as () => void) : undefined;
}

function committedHeapBytes(): number {
  return getHeapStatistics().total_heap_size;
}
