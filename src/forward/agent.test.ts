import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { useServers } from '../../test/support/servers.js';
import httpProxy from 'http-proxy';
import { createUpstreamAgent } from './agent.js';

const { listen, onClose } = useServers();

describe('the upstream agent', () => {
  it('opens relay connections with connection fields only: the first request’s headers (its key among them) are not kept with the socket', async () => {
    const relayPort = await listen((req, res) => res.end(`auth=${req.headers.authorization ?? ''}`));
    const upstream = new URL(`http://127.0.0.1:${relayPort}`);
    const agent = createUpstreamAgent(upstream);
    onClose(() => agent.destroy());
    // What Node's Agent holds for the socket's life is what it opens the connection with.
    const opened: Array<Record<string, unknown>> = [];
    const opener = agent as unknown as { createConnection: (o: net.NetConnectOpts, cb: () => void) => net.Socket };
    opener.createConnection = (o, cb) => {
      opened.push({ ...o });
      return net.createConnection(o, cb);
    };
    const proxy = httpProxy.createProxyServer({ agent, changeOrigin: true, xfwd: false, ws: false });
    const port = await listen((req, res) => proxy.web(req, res, { target: upstream.origin }));

    const answers: string[] = [];
    for (const key of ['sk-first-key-value', 'sk-second-key-value']) {
      const r = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
      answers.push(await r.text());
    }
    expect(answers).toEqual(['auth=Bearer sk-first-key-value', 'auth=Bearer sk-second-key-value']);
    expect(opened.length).toBeGreaterThanOrEqual(1);
    for (const o of opened) {
      expect(o).toMatchObject({ host: '127.0.0.1', port: String(relayPort), keepAlive: true, noDelay: true });
      expect(Object.keys(o)).not.toContain('headers');
      expect(Object.values(o)).not.toContain(undefined);
      expect(JSON.stringify(o)).not.toContain('sk-first-key-value');
    }
  });
});
