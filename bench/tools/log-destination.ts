/**
 * What a log destination costs per line, in isolation: process CPU (all threads, libuv's thread
 * pool included) per line written to /dev/null, N lines per event-loop turn, for sluice's
 * destination at BEFORE_REF against the working tree's, and for reference SonicBoom gathering
 * lines itself (`minLength`, with `periodicFlush`) and SonicBoom taking every line as its own
 * asynchronous write (pino.destination's default with sync: false). The loop's
 * own cost (the same turns, writing nothing) is subtracted. Rounds alternate the contenders in a
 * rotating order; medians are printed.
 *   [BEFORE_REF=HEAD] npx tsx bench/tools/log-destination.ts [lines per turn=1,8,32] [rounds=5]
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { logDestination } from '../../src/log/index.js';
import { srcAt } from '../lib/ref-src.js';

const perTurns = (process.argv[2] ?? '1,8,32').split(',').map(Number);
const rounds = Number(process.argv[3] ?? 5);
const ref = process.env.BEFORE_REF ?? 'HEAD';
const total = 100_000;
const line = '{"level":30,"time":"2026-11-23T04:20:00.000Z","svc":"sluice","reqId":"01JD2X3Y4Z5A6B7C8D9E0F1G2H","method":"POST","path":"/v1/chat/completions","family":"openai","ip":"127.0.0.1","user":"bench-1234-17","keyId":"k_abcdefghijkl","model":"gpt-4o-mini","freeTier":false,"decision":"admitted","status":200,"decisionMs":0.05,"relayMs":1.23,"totalMs":1.4,"msg":"request"}\n';

interface Writer {
  write(s: string): unknown;
  destroy?(): void;
  sink?: { destroy(): void };
}
const old = (await import(pathToFileURL(join(srcAt(ref), 'log.js')).href)) as { logDestination(dest: string): Writer };
const kinds: Record<string, () => Writer> = {
  loop: () => ({ write: () => true }),
  [`before (${ref})`]: () => old.logDestination('/dev/null'),
  after: () => logDestination('/dev/null'),
  // Its minLength must stay below its maxWrite (16 KB by default).
  'SonicBoom minLength 8 KB': () => pino.destination({ dest: '/dev/null', sync: false, minLength: 8192, periodicFlush: 50 }),
  'SonicBoom, a write per line': () => pino.destination({ dest: '/dev/null', sync: false }),
};

async function measure(make: () => Writer, perTurn: number): Promise<number> {
  const dest = make();
  await new Promise((r) => setTimeout(r, 50)); // let a file destination open
  let n = 0;
  const c0 = process.cpuUsage();
  await new Promise<void>((done) => {
    const turn = (): void => {
      // `+ ''` makes each line a fresh string, as a logger's would be.
      for (let i = 0; i < perTurn; i++) dest.write(line + '');
      n += perTurn;
      if (n < total) setImmediate(turn);
      else done();
    };
    turn();
  });
  await new Promise((r) => setTimeout(r, 120)); // the last held lines' and asynchronous write's CPU counts too
  const c = process.cpuUsage(c0);
  (dest.sink ?? dest).destroy?.();
  return (c.user + c.system) / n;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ids = Object.keys(kinds);
const width = Math.max(...ids.map((id) => id.length));
for (const perTurn of perTurns) {
  const acc = new Map<string, number[]>(ids.map((id) => [id, []]));
  for (let round = 0; round < rounds; round++) {
    for (const id of ids.map((_, i) => ids[(i + round) % ids.length]!)) acc.get(id)!.push(await measure(kinds[id]!, perTurn));
  }
  // Over the loop, paired within a round.
  const loop = acc.get('loop')!;
  console.log(`${perTurn} lines a turn, ${rounds} rounds of ${total} lines: µs CPU per line over the loop's (median ${median(loop).toFixed(2)}), median (rounds)`);
  for (const [id, xs] of acc) {
    if (id === 'loop') continue;
    const over = xs.map((x, i) => x - loop[i]!);
    console.log(`  ${id.padEnd(width)}  ${median(over).toFixed(2)}  (${over.map((x) => x.toFixed(2)).join(' ')})`);
  }
}
process.exit(0);
