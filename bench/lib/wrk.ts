/** Closed-loop load from wrk (a separate process): fixed connections, as fast as answers come. */
import { join } from 'node:path';
import { BENCH_DIR } from './build.js';
import { run } from './proc.js';

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  /** Latency percentiles in ms. */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  /** Answers that were not 2xx/3xx. */
  non2xx: number;
  /** Socket errors (connect/read/write/timeout). */
  errors: number;
}

export interface WrkOptions {
  url: string;
  connections: number;
  seconds: number;
  threads?: number;
  method?: string;
  body?: string;
  /** API keys, used in turn (one per request). */
  keys?: readonly string[];
}

export async function wrk(o: WrkOptions): Promise<LoadResult> {
  const out = await run(
    'wrk',
    ['-t', String(o.threads ?? 1), '-c', String(o.connections), '-d', `${o.seconds}s`, '--timeout', '5s', '-s', join(BENCH_DIR, 'wrk', 'request.lua'), o.url],
    {
      env: { BENCH_METHOD: o.method ?? 'POST', BENCH_BODY: o.body ?? '', BENCH_KEYS: (o.keys ?? []).join(',') },
      timeoutMs: (o.seconds + 20) * 1000,
    },
  );
  const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (!line) throw new Error(`wrk printed no summary:\n${out}`);
  const j = JSON.parse(line.slice('BENCH_JSON '.length)) as Record<string, number>;
  const seconds = j.duration_us! / 1e6;
  return {
    requests: j.requests!,
    seconds,
    rps: j.requests! / seconds,
    p50: j.p50! / 1000,
    p90: j.p90! / 1000,
    p99: j.p99! / 1000,
    p999: j.p999! / 1000,
    max: j.max! / 1000,
    non2xx: j.status!,
    errors: j.connect! + j.read! + j.write! + j.timeout!,
  };
}
