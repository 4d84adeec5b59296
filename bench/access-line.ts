/**
 * What one access line costs, in isolation: `npx tsx bench/access-line.ts [lines]`.
 *
 * Formatting: the gateway's call (createAccessLog) on a mix of records (a paid call relayed, a
 * free-tier call, a refusal), through sluice's own logger (the line built by hand) against a pino
 * logger with the same options (the line built by `log.info`, as before), both onto a destination
 * that drops the line, alternating, five rounds of `lines` (300k) each after a warm-up; median
 * and range of CPU (all threads: the garbage collector's too) per line.
 *
 * Destination: CPU (all threads) per line handed to logDestination('/dev/null') (held up to 16 KB
 * or 50 ms, then one asynchronous write), 8 lines per event-loop turn, over the same loop
 * writing nothing; median and range of five rounds.
 *
 * A micro-benchmark: what the line costs in a hot loop, not among a request's other work.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { createAccessLog, type AccessRecord } from '../src/log/access.js';
import { createLogger, logDestination, loggerOptions } from '../src/log/index.js';
import type { Outcome } from '../src/answers/outcome.js';

const lines = Number(process.argv[2] ?? 300_000);
const rounds = 5;

const now = performance.now();
const records: Array<[AccessRecord, Outcome]> = [
  [
    {
      id: '01JD2X3Y4Z5A6B7C8D9E0F1G2H',
      method: 'POST',
      path: '/v1/chat/completions',
      family: 'chat',
      ip: '127.0.0.1',
      user: 'bench-1234-17',
      keyId: 'k_abcdefghijkl',
      model: 'gpt-4o-mini',
      freeTier: false,
      status: 200,
      start: now,
      decidedMs: 0.0532,
      upstreamMs: 1.2345,
    },
    'admitted',
  ],
  [
    {
      id: '01JD2X3Y4Z5A6B7C8D9E0F1G2J',
      method: 'POST',
      path: '/v1beta/models/gemini-2.5-flash:generateContent',
      family: 'gemini',
      ip: '127.0.0.1',
      user: 'bench-1234-18',
      keyId: 'k_mnopqrstuvwx',
      model: 'gemini-2.5-flash',
      freeTier: true,
      status: 200,
      start: now,
      decidedMs: 0.0811,
      upstreamMs: 2.5,
    },
    'admitted',
  ],
  [
    {
      id: '01JD2X3Y4Z5A6B7C8D9E0F1G2K',
      method: 'POST',
      path: '/v1/chat/completions',
      family: 'chat',
      ip: '127.0.0.1',
      reason: 'unknown_key',
      status: 401,
      start: now,
      decidedMs: 0.0123,
    },
    'unauthorized',
  ],
];

/** A destination that takes the line and drops it: what is left is the line's building. */
const drop = (): Writable => {
  const w = new Writable();
  w.write = () => true;
  return w;
};

const built = {
  'built by hand (sluice’s logger)': createAccessLog(createLogger('info', drop())),
  'log.info (pino, same options)': createAccessLog(pino(loggerOptions('info'), drop())),
};

/** CPU, not wall time: on a shared machine the process is not always running. */
function perLine(access: (r: AccessRecord, d: Outcome) => void, n: number): number {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const [r, d] = records[i % records.length]!;
    access(r, d);
  }
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

const summary = (us: number[]): string => {
  const s = [...us].sort((a, b) => a - b);
  return `median ${s[Math.floor(s.length / 2)]!.toFixed(2)} µs (${s[0]!.toFixed(2)}-${s[s.length - 1]!.toFixed(2)})`;
};

const times: Record<string, number[]> = {};
for (const [name, access] of Object.entries(built)) {
  perLine(access, 100_000); // warm-up: the optimising compiler settles
  times[name] = [];
}
for (let r = 0; r < rounds; r++) for (const [name, access] of Object.entries(built)) times[name]!.push(perLine(access, lines));
for (const [name, us] of Object.entries(times)) console.log(`formatting, ${name}: ${summary(us)} CPU per line`);

const line =
  '{"level":30,"time":"2026-11-23T04:20:00.000Z","svc":"sluice","reqId":"01JD2X3Y4Z5A6B7C8D9E0F1G2H","method":"POST","path":"/v1/chat/completions","family":"chat","ip":"127.0.0.1","user":"bench-1234-17","keyId":"k_abcdefghijkl","model":"gpt-4o-mini","freeTier":false,"decision":"admitted","status":200,"decisionMs":0.05,"relayMs":1.23,"totalMs":1.4,"msg":"request"}\n';

async function cpuPerLine(dest: { write(s: string): unknown }, n: number, perTurn = 8): Promise<number> {
  let written = 0;
  const c0 = process.cpuUsage();
  await new Promise<void>((done) => {
    const turn = (): void => {
      // `+ ''`: a fresh string each time, as a built line is.
      for (let i = 0; i < perTurn; i++) dest.write(line + '');
      written += perTurn;
      if (written < n) setImmediate(turn);
      else done();
    };
    turn();
  });
  // The last held lines' write, and its CPU, count too.
  await new Promise((r) => setTimeout(r, 120));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

const held = logDestination('/dev/null');
await new Promise((r) => held.sink.once('ready', r));
const loop = { write: (): boolean => true };
const dest: number[] = [];
await cpuPerLine(held, lines / 3);
for (let r = 0; r < rounds; r++) dest.push((await cpuPerLine(held, lines)) - (await cpuPerLine(loop, lines)));
console.log(`destination, logDestination('/dev/null'), 8 lines per turn: ${summary(dest)} CPU per line`);
process.exit(0);
