/**
 * The loop the small A/B tools share: every contender warmed, then N rounds of wrk against each
 * in an order rotated every round (so drift hits all alike), and the medians printed against one
 * baseline, as the median of per-round ratios (paired within a round).
 */
import { measureWhile, type Server } from './proc.js';
import { wrk } from './wrk.js';

export interface Contender {
  id: string;
  server: Server;
}

export interface AlternateOptions {
  rounds: number;
  seconds: number;
  body: string;
  /** Keys the load rotates over (default: the server's own, else a dummy). */
  keys?: readonly string[];
  /** Stop on any answer that is not 2xx (the tools compare admitted calls only). */
  require2xx?: boolean;
}

export interface RoundFigures {
  rps: number;
  /** Server CPU time per request, µs. */
  cpuUs: number;
}

export async function alternate(cs: readonly Contender[], o: AlternateOptions): Promise<Map<string, RoundFigures[]>> {
  const go = (c: Contender, seconds: number) =>
    wrk({
      url: `http://127.0.0.1:${c.server.info.port as number}/v1/chat/completions`,
      connections: 32,
      seconds,
      body: o.body,
      keys: o.keys ?? (c.server.info.keys as string[] | undefined) ?? ['sk-x'],
    });
  for (const c of cs) await go(c, 2);
  const acc = new Map<string, RoundFigures[]>(cs.map((c) => [c.id, []]));
  for (let r = 0; r < o.rounds; r++) {
    for (const c of cs.map((_, i) => cs[(i + r) % cs.length]!)) {
      const { result, usage } = await measureWhile(c.server, () => go(c, o.seconds));
      if (o.require2xx && result.non2xx > 0) throw new Error(`${c.id}: ${result.non2xx} answers were not 2xx`);
      acc.get(c.id)!.push({ rps: result.rps, cpuUs: (usage.cpuPct / 100 / result.rps) * 1e6 });
    }
  }
  return acc;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** One line per contender: median req/s, median ratio to `baseId` per round, CPU µs per request, the rounds. */
export function printAgainst(acc: Map<string, RoundFigures[]>, baseId: string): void {
  const base = acc.get(baseId)!;
  const width = Math.max(...[...acc.keys()].map((id) => id.length));
  for (const [id, xs] of acc) {
    const ratio = median(xs.map((x, i) => x.rps / base[i]!.rps));
    console.log(
      `${id.padEnd(width)}  ${median(xs.map((x) => x.rps)).toFixed(0).padStart(6)} req/s  ${ratio.toFixed(2)} of ${baseId}  ` +
        `${median(xs.map((x) => x.cpuUs)).toFixed(0).padStart(4)} µs/req  (rounds: ${xs.map((x) => x.rps.toFixed(0)).join(' ')})`,
    );
  }
}
