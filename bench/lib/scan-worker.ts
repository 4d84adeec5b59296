/**
 * Microbenchmark: reading `model` from a 20 MB body with the byte scanner (src/model/scan.ts),
 * the field first, in the middle and last, on four body shapes:
 * - `blob`: two 10 MB strings (an inlined base64 file: the usual reason a body is that big);
 * - `chat-2k`: ~10,000 messages of ~2 KB of prose (escaped newlines only);
 * - `chat-200`: ~100,000 messages of ~200 B (ten times the tokens);
 * - `chat-esc`: 2 KB messages dense with escaped quotes (code or JSON inside JSON).
 * Three ways, each the median of N runs after warm-up:
 * - whole: `scanModel` over the complete body at once (for reference: sluice reads bodies from
 *   256 KB through the prepass, whether they arrive plain or compressed);
 * - on arrival, as sluice reads an uncompressed body with a declared length (src/http/body.ts): each
 *   64 KB chunk goes to the body accumulator (kept, then moved into one buffer from half-way) and
 *   to the prepass as it comes (`chunk max`: the longest the event loop is held per chunk), then
 *   the body is taken and `scanModel` runs with the hints once the last byte is in (`after last
 *   byte`: the last chunk's share plus that, the wait the request itself sees).
 * - gzipped, as sluice reads a compressed body: decoded in zlib's thread pool, then fed to the
 *   prepass a 64 KB slice per event-loop turn (`requestedModel`); `total` from the last byte to the
 *   model, `longest block` the longest gap between turns of the event loop meanwhile.
 * JSON.parse of the same body once, for reference.
 * Runs compiled in its own process (`npm run bench -- scan` spawns it: `node scan-worker.js <runs>`);
 * prints one JSON line.
 */
import { Accumulator } from '../../src/http/body.js';
import { ModelPrepass } from '../../src/model/prepass.js';
import { gzipSync } from 'node:zlib';
import { requestedModel } from '../../src/model/index.js';
import { scanModel } from '../../src/model/scan.js';

const TARGET = 20 * 1024 * 1024;
const RUNS = Number(process.argv[2] ?? 11);

const SHAPES = ['blob', 'chat-2k', 'chat-200', 'chat-esc'] as const;
type Shape = (typeof SHAPES)[number];

function messages(text: string, bytes: number): string[] {
  const out: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const m =
      i % 2 === 0
        ? `{"role":"user","content":"${text}"}`
        : `{"role":"assistant","content":[{"type":"text","text":"${text}"},{"type":"tool_use","id":"t${i}","input":{"q":[1,2.5e3,true,null]}}]}`;
    out.push(m);
    size += m.length + 1;
  }
  return out;
}

function bodies(shape: Shape): Record<'start' | 'middle' | 'end', Buffer> {
  const model = '"model":"vend-flash-free"';
  if (shape === 'blob') {
    const blob = 'QUJD'.repeat(Math.floor((TARGET - 200) / 8));
    return {
      start: Buffer.from(`{${model},"a":"${blob}","b":"${blob}"}`),
      middle: Buffer.from(`{"a":"${blob}",${model},"b":"${blob}"}`),
      end: Buffer.from(`{"a":"${blob}","b":"${blob}",${model}}`),
    };
  }
  const prose = 'The quick brown fox jumps over the lazy dog, caf\\u00e9.\\n ';
  const code = 'print(\\"a\\", {\\"k\\": 1})\\n';
  const text = shape === 'chat-2k' ? prose.repeat(36) : shape === 'chat-200' ? prose.repeat(3) : code.repeat(80);
  const msgs = messages(text, TARGET - 200);
  const half = Math.floor(msgs.length / 2);
  const first = `"messages":[${msgs.slice(0, half).join(',')}]`;
  const second = `"tools":[${msgs.slice(half).join(',')}]`;
  return {
    start: Buffer.from(`{${model},${first},${second}}`),
    middle: Buffer.from(`{${first},${model},${second}}`),
    end: Buffer.from(`{${first},${second},${model}}`),
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)]!;
}

const CHUNK = 64 * 1024;

/** One body read as sluice reads it: per-chunk copy and prepass, then the final scan. */
function onArrival(buf: Buffer): { chunkMaxMs: number; afterLastMs: number } {
  const acc = new Accumulator(buf.length);
  const prepass = new ModelPrepass();
  let chunkMaxMs = 0;
  let lastMs = 0;
  for (let off = 0; off < buf.length; off += CHUNK) {
    // A fresh buffer per chunk, as a socket read gives.
    const chunk = Buffer.from(buf.subarray(off, off + CHUNK));
    const t = performance.now();
    acc.add(chunk);
    prepass.feed(chunk);
    lastMs = performance.now() - t;
    chunkMaxMs = Math.max(chunkMaxMs, lastMs);
  }
  const t = performance.now();
  const r = scanModel(acc.take(), prepass);
  const finalMs = performance.now() - t;
  if (r.kind !== 'found' || r.model !== 'vend-flash-free') throw new Error(`arrival scan failed: ${JSON.stringify(r)}`);
  return { chunkMaxMs: Math.max(chunkMaxMs, finalMs), afterLastMs: lastMs + finalMs };
}

/** One body shape and model position; the scan scenario reads these from the printed line. */
export interface ScanRow {
  shape: string;
  position: string;
  mb: number;
  /** `scanModel` over the whole body at once. */
  medianMs: number;
  maxMs: number;
  /** Read as sluice reads an uncompressed body (prepass per 64 KB chunk, then the final scan). */
  arrivalChunkMaxMs: number;
  arrivalAfterLastMs: number;
  /** Read as sluice reads a gzipped body (decoded off the event loop, prepass in slices). */
  gzipTotalMs: number;
  gzipLongestBlockMs: number;
  jsonParseMs: number;
}

/** The compressed path, timed while a ticker measures the longest the event loop was held. */
async function compressed(gz: Buffer): Promise<{ totalMs: number; longestBlockMs: number }> {
  let longest = 0;
  let last = performance.now();
  let ticking = true;
  const tick = (): void => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const t = performance.now();
  const m = await requestedModel('POST', '/v1/chat/completions', { 'content-type': 'application/json', 'content-encoding': 'gzip' }, gz, 32 * 1024 * 1024);
  const totalMs = performance.now() - t;
  ticking = false;
  if (!m.ok || m.model !== 'vend-flash-free') throw new Error(`compressed read failed: ${JSON.stringify(m)}`);
  return { totalMs, longestBlockMs: longest };
}

const results: ScanRow[] = [];
for (const shape of SHAPES) {
  const b = bodies(shape);
  for (const position of ['start', 'middle', 'end'] as const) {
    const buf = b[position];
    const r = scanModel(buf);
    if (r.kind !== 'found' || r.model !== 'vend-flash-free') throw new Error(`scan failed on ${shape}/${position}: ${JSON.stringify(r)}`);
    for (let i = 0; i < 3; i++) scanModel(buf); // warm-up
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t = performance.now();
      scanModel(buf);
      times.push(performance.now() - t);
    }
    for (let i = 0; i < 2; i++) onArrival(buf); // warm-up
    const arrivals = Array.from({ length: RUNS }, () => onArrival(buf));
    const gz = gzipSync(buf, { level: 1 });
    await compressed(gz); // warm-up
    const gzRuns: Array<{ totalMs: number; longestBlockMs: number }> = [];
    for (let i = 0; i < Math.min(RUNS, 5); i++) gzRuns.push(await compressed(gz));
    const t = performance.now();
    JSON.parse(buf.toString('utf8'));
    const jsonParseMs = performance.now() - t;
    results.push({
      shape,
      position,
      mb: buf.length / 1024 / 1024,
      medianMs: median(times),
      maxMs: Math.max(...times),
      arrivalChunkMaxMs: median(arrivals.map((a) => a.chunkMaxMs)),
      arrivalAfterLastMs: median(arrivals.map((a) => a.afterLastMs)),
      gzipTotalMs: median(gzRuns.map((g) => g.totalMs)),
      gzipLongestBlockMs: median(gzRuns.map((g) => g.longestBlockMs)),
      jsonParseMs,
    });
  }
}
process.stdout.write(JSON.stringify({ ready: true, runs: RUNS, results }) + '\n');
