/**
 * Benchmark process: the relay stand-in, quiet, with a bounded request log.
 * Behaviour is chosen per request by the `x-bench-mode` header (it passes through sluice):
 * - `ttfe`: stream whose headers and first event come after `BENCH_TTFE_DELAY_MS` (default 20),
 *   then the rest of a 4-delta chat stream (7 events in all) every 5 ms; the answer carries
 *   `x-bench-sent-ns`, the relay's monotonic clock as it wrote the headers and first event;
 * - `hold`: stream that sends its first event at once, then nothing for 10 minutes.
 * Prints one JSON line `{"ready":true,"port":N}` on stdout.
 */
import { startRelayStandin } from '../../demo/relay.js';
import { onStopSignal } from './common.js';
import { SENT_AT_HEADER } from '../lib/sse.js';

const relay = await startRelayStandin({ port: 0, quiet: true, maxRecorded: 100 });
const delayMs = Number(process.env.BENCH_TTFE_DELAY_MS ?? 20);
relay.behave((r) => r.headers['x-bench-mode'] === 'ttfe', { delayMs, sseIntervalMs: 5, sseEvents: 4, stampHeader: SENT_AT_HEADER });
relay.behave((r) => r.headers['x-bench-mode'] === 'hold', { sseIntervalMs: 600_000, sseEvents: 2 });
process.stdout.write(JSON.stringify({ ready: true, port: relay.port, pid: process.pid }) + '\n');
onStopSignal(() => relay.close());
