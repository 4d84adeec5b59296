/** A raw HTTP client for tests: exact headers in, exact bytes out. */
import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  text: string;
}

/**
 * Sends one request. A body goes with `content-type: application/json` unless the caller names a
 * content-type (`undefined` sends none): the relay reads a model only from a body whose
 * Content-Type says how to read it, as every SDK sends.
 */
export function request(
  baseUrl: string,
  method: string,
  path: string,
  opts: { headers?: OutgoingHttpHeaders; body?: Buffer | string; agent?: http.Agent | false } = {},
): Promise<RawResponse> {
  const u = new URL(baseUrl);
  const headers: OutgoingHttpHeaders = {};
  let namesType = false;
  for (const [name, value] of Object.entries(opts.headers ?? {})) {
    if (name.toLowerCase() === 'content-type') namesType = true;
    if (value !== undefined) headers[name] = value;
  }
  if (opts.body !== undefined && !namesType) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, agent: opts.agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body, text: body.toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.body !== undefined) req.end(opts.body);
    else req.end();
  });
}

export const json = (o: unknown): string => JSON.stringify(o);

/**
 * A chat completion as an SDK sends it: `POST /v1/chat/completions` with the key as a Bearer token
 * and a one-message body asking for `model` (default `vend-flash`, a paid model of the stand-in).
 */
export function chat(baseUrl: string, key: string, opts: { model?: string; headers?: OutgoingHttpHeaders; agent?: http.Agent | false } = {}): Promise<RawResponse> {
  return request(baseUrl, 'POST', '/v1/chat/completions', {
    headers: { authorization: `Bearer ${key}`, ...opts.headers },
    body: json({ model: opts.model ?? 'vend-flash', messages: [{ role: 'user', content: 'hi' }] }),
    agent: opts.agent,
  });
}
