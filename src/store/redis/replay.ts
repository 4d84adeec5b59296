/**
 * Calls admitted during an outage, added to the shared counts once Redis answers again
 * (lua/replay.lua says how each is recognised if it was counted already). Runs are cut
 * as decisions' are (decisions.ts): up to 64 calls per script run, one on a Cluster or behind a
 * sharding proxy, so a run holds keys of one slot and never holds Redis for long.
 */
import { limitKey, resetMarkKey } from '../limit-key.js';
import type { OutageAdmission, ReplayOutcome } from '../types.js';
import type { RedisConnection } from './connection.js';
import { REPLAYED_SUFFIX } from './scripts.js';
import { perRunOf, pushTriple, sameShape, validMember } from './decisions.js';

const OUTCOMES: Readonly<Record<string, ReplayOutcome>> = { '1': 'replayed', '2': 'already_counted', '3': 'expired', '4': 'unknown', '5': 'reset', '-1': 'failed' };

export class RedisReplay {
  private readonly perRun: number;

  constructor(
    private readonly client: RedisConnection,
    /** Prefix of every key. */
    private readonly prefix: string,
    batchDecisions: boolean,
  ) {
    this.perRun = perRunOf(client, batchDecisions);
  }

  /** One outcome per admission; a run Redis did not answer leaves its admissions at `retry`. */
  async replay(admissions: readonly OutageAdmission[], nowMs: number): Promise<ReplayOutcome[]> {
    const out: ReplayOutcome[] = admissions.map((a) => (validMember(a.member) ? 'retry' : 'failed'));
    if (this.client.status !== 'ready') return out;
    const runs: Array<Promise<void>> = [];
    let run: number[] = [];
    for (let i = 0; i < admissions.length; i++) {
      if (out[i] !== 'retry') continue;
      run.push(i);
      if (run.length === this.perRun) {
        runs.push(this.send(admissions, run, nowMs, out));
        run = [];
      }
    }
    if (run.length > 0) runs.push(this.send(admissions, run, nowMs, out));
    await Promise.all(runs);
    return out;
  }

  /** One script run over the admissions at `at`; writes their outcomes into `out` (left at `retry` on failure). */
  private async send(admissions: readonly OutageAdmission[], at: readonly number[], nowMs: number, out: ReplayOutcome[]): Promise<void> {
    const keys: string[] = [];
    const args: Array<string | number> = [nowMs, 0];
    const shapes: Array<OutageAdmission['checks']> = [];
    let packed = '';
    for (const i of at) {
      const a = admissions[i]!;
      let s = 0;
      while (s < shapes.length && !sameShape(shapes[s]!, a.checks)) s++;
      if (s === shapes.length) {
        shapes.push(a.checks);
        args.push(a.checks.length);
        for (const c of a.checks) pushTriple(c, args);
      }
      // Its subject's reset time, if any (every check of a call is of one subject: one slot).
      keys.push(this.prefix + resetMarkKey(a.checks[0]?.subject ?? ''));
      for (const c of a.checks) {
        const key = this.prefix + limitKey(c);
        keys.push(key);
        if (c.kind === 'counter') keys.push(key + REPLAYED_SUFFIX);
      }
      packed += `${a.nowMs} ${a.member} ${s + 1} ${a.maybeCounted ? 'm' : 'n'} `;
    }
    args[1] = shapes.length;
    args.push(packed);
    let r: unknown;
    try {
      r = await this.client.sluiceReplay(keys.length, ...keys, ...args);
    } catch {
      return; // not answered (or a fault of Redis itself): every admission of the run is tried again later
    }
    if (!Array.isArray(r) || r.length !== at.length) {
      for (const i of at) out[i] = 'failed';
      return;
    }
    at.forEach((i, j) => {
      out[i] = OUTCOMES[String(r[j])] ?? 'failed';
    });
  }
}
