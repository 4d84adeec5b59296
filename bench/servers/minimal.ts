/**
 * Benchmark process: the minimal relay, a plain `http.createServer` that reads the request body
 * and answers a 263-byte JSON chat completion with a content-length. It costs next to nothing per
 * request, so how the requests reach it (one by one or in batches) shows in every figure: the
 * second relay profile of `npm run bench`, beside the heavier stand-in (relay.ts).
 * Prints one JSON line `{"ready":true,"port":N}` on stdout.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { onStopSignal } from './common.js';

const ANSWER = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello!' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 },
  }).padEnd(263, ' '),
);
if (ANSWER.length !== 263) throw new Error(`minimal relay answer is ${ANSWER.length} bytes`);

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': ANSWER.length });
    res.end(ANSWER);
  });
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(JSON.stringify({ ready: true, port, pid: process.pid }) + '\n');
});
onStopSignal(() => {
  server.closeAllConnections();
  server.close();
});
