/**
 * What a log destination costs per line, in isolation: CPU (all threads) per line written to
 * /dev/null, with N lines per event-loop turn, for the destination sluice uses (lines held up to
 * 16 KB or 50 ms, then one asynchronous SonicBoom write) against SonicBoom taking every line
 * itself, asynchronously (sluice's destination before) and synchronously (pino's default). The loop's own
 * cost (the same turns, writing nothing) is subtracted.
 *   npx tsx bench/tools/log-destination.ts [lines per turn, comma-separated: 1,8,32]
 */
import pino from 'pino';
import { logDestination } from '../../src/log.js';

const perTurns = (process.argv[2] ?? '1,8,32').split(',').map(Number);
const line = '{"level":30,"time":"2026-11-23T04:20:00.000Z","svc":"sluice","reqId":"01JD2X3Y4Z5A6B7C8D9E0F1G2H","method":"POST","path":"/v1/chat/completions","family":"openai","ip":"127.0.0.1","user":"bench-1234-17","keyId":"k_abcdefghijkl","model":"gpt-4o-mini","freeTier":false,"decision":"admitted","status":200,"decisionMs":0.05,"relayMs":1.23,"totalMs":1.4,"msg":"request"}\n';
const total = 300_000;

type Writer = { write(s: string): unknown };
const kinds: Record<string, () => Writer> = {
  loop: () => ({ write: () => true }),
  'held (sluice)': () => logDestination('/dev/null'),
  'sonic async': () => pino.destination({ dest: '/dev/null', sync: false }),
  'sonic sync': () => pino.destination({ dest: '/dev/null', sync: true }),
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
  return (c.user + c.system) / n;
}

for (const perTurn of perTurns) {
  for (let rep = 0; rep < 2; rep++) {
    const loop = await measure(kinds.loop!, perTurn);
    const cells: string[] = [];
    for (const [name, make] of Object.entries(kinds)) {
      if (name === 'loop') continue;
      cells.push(`${name} ${((await measure(make, perTurn)) - loop).toFixed(2)}`);
    }
    console.log(`${String(perTurn).padStart(3)} lines/turn, µs CPU per line over the loop (${loop.toFixed(2)}): ${cells.join(' | ')}`);
  }
}
process.exit(0);
