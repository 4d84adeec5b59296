/**
 * Reading `model` from 20 MB bodies, four shapes, the field first, in the middle and last
 * (bench/lib/scan-worker.ts, compiled, in its own process): as sluice reads an uncompressed body
 * (while it arrives), a gzipped one (decoded off the event loop), and the whole body at once and
 * JSON.parse for reference.
 */
import { built } from '../lib/build.js';
import { run } from '../lib/proc.js';
import type { ScanRow } from '../lib/scan-worker.js';
import { check, f, numFlag, table, type Scenario } from '../lib/scenario.js';

export const scan: Scenario = {
  name: 'scan',
  summary: '`model` read from 20 MB bodies in four shapes (the event loop held at most 2 ms)',
  headline: true,
  flags: { runs: { type: 'string', help: 'runs per shape and position, the median taken (default 11)' } },
  async run(ctx) {
    const runs = numFlag(ctx, 'runs', ctx.quick ? 3 : 11);
    ctx.log(`20 MB bodies, ${runs} runs each`);
    const out = await run(process.execPath, [built('lib/scan-worker.ts'), String(runs)], { timeoutMs: 300_000 });
    const rows = (JSON.parse(out.trim().split('\n').pop()!) as { results: ScanRow[] }).results;
    const shapes = [...new Set(rows.map((r) => r.shape))];
    // What a request waits for once its body is in, and the longest the event loop is held meanwhile.
    const worst = (shape: string): number => Math.max(...rows.filter((r) => r.shape === shape).map((r) => Math.max(r.arrivalAfterLastMs, r.arrivalChunkMaxMs)));
    const report =
      table(
        [
          'body',
          'model at',
          'MB',
          'on arrival: after last byte ms',
          'on arrival: longest block ms',
          'gzipped: total ms',
          'gzipped: longest block ms',
          'whole body at once ms',
          'JSON.parse ms',
        ],
        rows.map((r) => [
          r.shape,
          r.position,
          f(r.mb, 1),
          f(r.arrivalAfterLastMs),
          f(r.arrivalChunkMaxMs),
          f(r.gzipTotalMs, 1),
          f(r.gzipLongestBlockMs),
          f(r.medianMs),
          f(r.jsonParseMs, 1),
        ]),
      ) +
      `\nMedians of ${runs} runs. "On arrival": each 64 KB chunk to the body accumulator and the prepass as it comes, then the final scan; ` +
      '"gzipped": decoded in zlib\'s thread pool, then fed to the prepass a slice per event-loop turn; "whole body at once" is what sluice no longer does from 256 KB.\n';
    return {
      report,
      checks: [
        check(
          '`model` from a 20 MB body ≤ 2 ms wherever the field stands (uncompressed, read on arrival)',
          shapes.map((s) => `${s} ${f(worst(s))} ms`).join(', '),
          shapes.every((s) => worst(s) <= 2),
        ),
      ],
      data: rows,
    };
  },
};
