/**
 * What the access line costs, in isolation: process CPU (all threads, so the garbage collector's
 * share counts) per line for sluice's access log and logger at BEFORE_REF against the working
 * tree, onto a stream that drops what it gets. Rounds alternate the contenders in a rotating order;
 * medians are printed. Two variants of the working tree's logger show what its options cost:
 * pino's own isoTime for the timestamp, and no streamWrite hook.
 *   [BEFORE_REF=HEAD] npx tsx bench/tools/access-line.ts [rounds=9] [lines per round=200000]
 */
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { accessFields, createAccessLog, type AccessRecord } from '../../src/log/access.js';
import { createLogger, loggerOptions } from '../../src/log/index.js';
import { srcAt } from '../lib/ref-src.js';

const rounds = Number(process.argv[2] ?? 9);
const N = Number(process.argv[3] ?? 200_000);
const ref = process.env.BEFORE_REF ?? 'HEAD';

type AccessModule = typeof import('../../src/log/access.js');
type LogModule = { createLogger(level: string, destination: pino.DestinationStream): Logger };
const before = srcAt(ref);
const old = (await import(pathToFileURL(join(before, 'access-log.js')).href)) as AccessModule;
const oldLog = (await import(pathToFileURL(join(before, 'log.js')).href)) as LogModule;

const sink = { write: (_s: string): boolean => true };
const r: AccessRecord = {
  id: '20261123043510123aBcDeFgHiJkLm',
  start: performance.now(),
  method: 'POST',
  path: '/v1/chat/completions',
  family: 'openai',
  ip: '127.0.0.1',
  user: 'bench-1234-17',
  keyId: 'k_abcdefghijkl',
  model: 'gpt-4o-mini',
  freeTier: false,
  status: 200,
  decidedMs: 0.0512,
  upstreamMs: 1.2345,
};
const contenders: Record<string, () => void> = {};
const add = (id: string, access: (r: AccessRecord, d: 'admitted') => void): void => {
  contenders[id] = () => access(r, 'admitted');
};
add(`before (${ref})`, old.createAccessLog(oldLog.createLogger('info', sink)));
add('after', createAccessLog(createLogger('info', sink)));
add('after, pino isoTime', createAccessLog(pino({ ...loggerOptions('info'), timestamp: pino.stdTimeFunctions.isoTime }, sink)));
add('after, no hook', createAccessLog(pino({ ...loggerOptions('info'), hooks: {} }, sink)));
// The fields alone, built and dropped: what any way of logging them pays first.
contenders['fields only'] = () => void accessFields(r, 'admitted', 1);

const cpuPerLine = (line: () => void): number => {
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) line();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / N;
};
const ids = Object.keys(contenders);
const acc = new Map<string, number[]>(ids.map((id) => [id, []]));
for (const id of ids) cpuPerLine(contenders[id]!); // warm-up
for (let round = 0; round < rounds; round++) {
  for (const id of ids.map((_, i) => ids[(i + round) % ids.length]!)) acc.get(id)!.push(cpuPerLine(contenders[id]!));
}
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const width = Math.max(...ids.map((id) => id.length));
console.log(`${N} lines a round, ${rounds} rounds; µs CPU per line, median (rounds)`);
for (const [id, xs] of acc) console.log(`${id.padEnd(width)}  ${median(xs).toFixed(2)}  (${xs.map((x) => x.toFixed(2)).join(' ')})`);
