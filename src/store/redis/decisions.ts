/**
 * Limit decisions against Redis. Decisions asked for in one turn of the event loop are sent
 * together when it ends (src/runtime/turn-batch.ts): on a busy sidecar a command costs more than the
 * decision it carries (ioredis builds it and parses its reply, Redis reads it and sets up a script
 * run), so they go as one script run per batch. ioredis's own auto-pipelining merges writes only
 * within one tick, which under HTTP load is one request, and costs more than it saves.
 */
import { Redis } from 'ioredis';
import { TurnBatch } from '../../runtime/turn-batch.js';
import { limitKey } from '../limit-key.js';
import { NotSentError, type Decision, type LimitCheck, type LimitState } from '../types.js';
import type { RedisConnection } from './connection.js';
import type { ScriptResult } from './scripts.js';

/** What Lua's `%s` matches: a member holding any of it would break its run's decisions apart. */
const WHITE_SPACE = /[ \t\n\v\f\r]/;

/** Whether a member can travel in a script run's packed argument (lua/consume.lua): non-empty, no white space. */
export const validMember = (member: string): boolean => member !== '' && !WHITE_SPACE.test(member);

/** Decisions per script run at most: a run blocks Redis while it lasts. */
const MAX_BATCH = 64;

/**
 * Calls per script run: MAX_BATCH, or 1 on a Cluster (a script runs on one slot, and users
 * spread over slots) and behind a sharding proxy (`batchDecisions: false`).
 */
export const perRunOf = (client: RedisConnection, batchDecisions: boolean): number => (client instanceof Redis && batchDecisions ? MAX_BATCH : 1);

interface PendingDecision {
  checks: readonly LimitCheck[];
  nowMs: number;
  member: string;
  resolve(d: Decision): void;
  reject(err: unknown): void;
}

export class RedisDecisions {
  /** Decisions per script run (perRunOf). */
  private readonly perRun: number;
  /** Decisions asked for in this turn of the event loop. */
  private readonly turn = new TurnBatch<PendingDecision>((batch) => this.flush(batch));

  constructor(
    private readonly client: RedisConnection,
    /** Prefix of every key. */
    private readonly prefix: string,
    batchDecisions: boolean,
  ) {
    this.perRun = perRunOf(client, batchDecisions);
  }

  consume(checks: readonly LimitCheck[], nowMs: number, member: string): Promise<Decision> {
    // Members travel space-separated (lua/consume.lua), and Lua splits on any white space; sluice's own hold none.
    if (!validMember(member)) return Promise.reject(new Error('limit decision: a member must be non-empty and hold no white space'));
    return new Promise<Decision>((resolve, reject) => this.turn.add({ checks, nowMs, member, resolve, reject }));
  }

  async inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]> {
    const keys: string[] = [];
    const args: Array<string | number> = [nowMs];
    this.pushChecks(checks, keys, args);
    const r = await this.client.sluiceInspect(keys.length, ...keys, ...args);
    const out: LimitState[] = [];
    for (let i = 0; i < checks.length; i++) {
      out.push({ used: Number(r[i * 3]), retryAfterMs: Number(r[i * 3 + 1]), resetMs: Number(r[i * 3 + 2]) });
    }
    return out;
  }

  /** Appends checks as the scripts take them: each key to KEYS, a ('w' | 'c', limit, param) triple to ARGV. */
  private pushChecks(checks: readonly LimitCheck[], keys: string[], args: Array<string | number>): void {
    for (const c of checks) {
      keys.push(this.prefix + limitKey(c));
      pushTriple(c, args);
    }
  }

  /**
   * Sends the turn's decisions as runs of `perRun`, in one write on a single connection (a
   * Cluster writes to one connection per node, so there is nothing to hold). No run holds Redis
   * for long, and a run of one keeps its keys on one hash tag.
   */
  private flush(batch: readonly PendingDecision[]): void {
    const s = this.client instanceof Redis ? this.client.stream : undefined;
    s?.cork();
    try {
      for (let i = 0; i < batch.length; i += this.perRun) this.send(batch.slice(i, i + this.perRun));
    } finally {
      s?.uncork();
    }
  }

  /**
   * One script run: the run's shapes (each distinct set of checks, without keys: one per limit in
   * practice) once, then every decision's time, member and shape in one argument, its keys in KEYS.
   */
  private send(batch: readonly PendingDecision[]): void {
    if (this.client.status !== 'ready') {
      // ioredis would refuse it unsent (no offline queue): say so, for the outage replay.
      const err = new NotSentError(`Redis connection ${this.client.status}: the decision was not sent`);
      for (const d of batch) d.reject(err);
      return;
    }
    const keys: string[] = [];
    const args: Array<string | number> = [batch.length, 0];
    const shapes: Array<readonly LimitCheck[]> = [];
    const shapeOf: number[] = [];
    for (const d of batch) {
      let s = 0;
      while (s < shapes.length && !sameShape(shapes[s]!, d.checks)) s++;
      if (s === shapes.length) {
        shapes.push(d.checks);
        args.push(d.checks.length);
        for (const c of d.checks) pushTriple(c, args);
      }
      shapeOf.push(s + 1);
      for (const c of d.checks) keys.push(this.prefix + limitKey(c));
    }
    args[1] = shapes.length;
    let packed = '';
    for (let i = 0; i < batch.length; i++) packed += `${batch[i]!.nowMs} ${batch[i]!.member} ${shapeOf[i]!} `;
    args.push(packed);
    let sent: Promise<ScriptResult>;
    try {
      sent = this.client.sluiceConsume(keys.length, ...keys, ...args);
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(
      (r) => settle(batch, r),
      (err: unknown) => {
        for (const d of batch) d.reject(err);
      },
    );
  }
}

/** A check's period: a window's length, a counter's reset instant. */
const periodOf = (c: LimitCheck): number => (c.kind === 'window' ? c.windowMs : c.resetAtMs);

/** A check as the scripts take it in ARGV: 'w', limit, windowMs or 'c', limit, resetAtMs. */
export function pushTriple(c: LimitCheck, args: Array<string | number>): void {
  args.push(c.kind === 'window' ? 'w' : 'c', c.limit, periodOf(c));
}

/** Whether two decisions make the same checks but for their keys (one shape in a script run). */
export function sameShape(a: readonly LimitCheck[], b: readonly LimitCheck[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.kind !== y.kind || x.limit !== y.limit || periodOf(x) !== periodOf(y)) return false;
  }
  return true;
}

/** Hands each decision of a batch its part of the script's reply. Never throws: a reply of the wrong shape fails the decisions it cannot answer. */
function settle(batch: readonly PendingDecision[], r: ScriptResult): void {
  if (!Array.isArray(r)) {
    for (const d of batch) d.reject(new Error('limit decision: unexpected reply from Redis'));
    return;
  }
  let at = 0;
  for (const d of batch) {
    const n = d.checks.length;
    const rejectedBy = Number(r[at]);
    const retry = r[at + 1];
    const used: number[] = [];
    const resetMs: number[] = [];
    for (let i = at + 2; i < at + 2 + n && i < r.length; i++) used.push(Number(r[i]));
    for (let i = at + 2 + n; i < at + 2 + 2 * n && i < r.length; i++) resetMs.push(Number(r[i]));
    at += 2 + 2 * n;
    if (rejectedBy < 0) d.reject(new Error(`limit decision failed in Redis: ${String(retry)}`));
    else if (!Number.isInteger(rejectedBy) || resetMs.length !== n || rejectedBy > n) d.reject(new Error('limit decision: unexpected reply from Redis'));
    else if (rejectedBy === 0) d.resolve({ admitted: true, used, resetMs });
    else d.resolve({ admitted: false, rejectedBy: rejectedBy - 1, retryAfterMs: Number(retry), used, resetMs });
  }
}
