import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Counter, Gauge, Histogram } from './instruments.js';

async function render(...metrics: Array<Counter<string> | Gauge | Histogram<string>>): Promise<string> {
  const r = new Registry();
  for (const m of metrics) r.registerMetric(m as unknown as Parameters<Registry['registerMetric']>[0]);
  return r.metrics();
}

describe('metric instruments', () => {
  it('a labelled counter renders one line per label set seen, with escaped values', async () => {
    const c = new Counter('t_requests_total', 'Requests', ['family', 'outcome']);
    c.inc({ family: 'chat', outcome: 'admitted' });
    c.cell({ family: 'chat', outcome: 'admitted' }).value += 2;
    c.inc({ family: 'odd"one', outcome: 'x' }, 5);
    const text = await render(c);
    expect(text).toContain('# TYPE t_requests_total counter');
    expect(text).toContain('t_requests_total{family="chat",outcome="admitted"} 3');
    expect(text).toContain('t_requests_total{family="odd\\"one",outcome="x"} 5');
  });

  it('the same label values reach the same cell whatever object carries them', () => {
    const c = new Counter('t_total', 'x', ['a', 'b']);
    expect(c.cell({ a: '1', b: '2' })).toBe(c.cell({ b: '2', a: '1' }));
    expect(c.cell({ a: '1', b: '2' })).not.toBe(c.cell({ a: '12', b: '' }));
  });

  it('label sets that would join to the same text stay apart, and a missing label is an error', () => {
    const c = new Counter('t_total', 'x', ['a', 'b']);
    expect(c.cell({ a: 'x\u0001y', b: 'z' })).not.toBe(c.cell({ a: 'x', b: 'y\u0001z' }));
    expect(c.cell({ a: '1:', b: '' })).not.toBe(c.cell({ a: '1', b: ':' }));
    expect(() => c.inc({ a: 'x' } as unknown as { a: string; b: string })).toThrow(/label "b" is missing/);
  });

  it('a gauge goes up and down', async () => {
    const g = new Gauge('t_open', 'Open');
    g.inc();
    g.inc();
    g.dec();
    expect(g.value).toBe(1);
    expect(await render(g)).toContain('\nt_open 1');
  });

  it('a histogram renders cumulative buckets, +Inf, sum and count, with inclusive upper bounds', async () => {
    const h = new Histogram('t_seconds', 'Latency', ['family'], [0.1, 0.01, 1]);
    const cell = h.cell({ family: 'chat' });
    for (const v of [0.005, 0.01, 0.05, 0.5, 2]) cell.observe(v);
    h.cell({ family: 'gemini' }).observe(0.2);
    const text = await render(h);
    expect(text).toContain('t_seconds_bucket{le="0.01",family="chat"} 2');
    expect(text).toContain('t_seconds_bucket{le="0.1",family="chat"} 3');
    expect(text).toContain('t_seconds_bucket{le="1",family="chat"} 4');
    expect(text).toContain('t_seconds_bucket{le="+Inf",family="chat"} 5');
    expect(text).toContain('t_seconds_sum{family="chat"} 2.565');
    expect(text).toContain('t_seconds_count{family="chat"} 5');
    expect(text).toContain('t_seconds_bucket{le="0.1",family="gemini"} 0');
    expect(text).toContain('t_seconds_bucket{le="1",family="gemini"} 1');
  });
});
