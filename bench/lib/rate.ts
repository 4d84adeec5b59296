/** Fixed-rate load from bench/lib/rate-client.ts, in its own process. */
import { built } from './build.js';
import { run } from './proc.js';

export interface RateResult {
  sent: number;
  completed: number;
  rps: number;
  non2xx: number;
  errors: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export async function atRate(o: { port: number; rate: number; seconds: number; connections: number; body: string; keys: readonly string[] }): Promise<RateResult> {
  const args = {
    host: '127.0.0.1',
    port: o.port,
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    keys: o.keys,
    body: o.body,
    rate: o.rate,
    seconds: o.seconds,
    connections: o.connections,
  };
  const out = await run(process.execPath, [built('lib/rate-client.ts'), JSON.stringify(args)], {
    timeoutMs: (o.seconds + 30) * 1000,
  });
  return JSON.parse(out.trim().split('\n').pop()!) as RateResult;
}
