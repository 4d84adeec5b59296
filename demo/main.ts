/**
 * `npm run demo`: the relay stand-in plus sluice on the embedded store, a key
 * created, and ready-to-paste curl lines for the three protocol families.
 */
import { randomBytes } from 'node:crypto';
import { createSluice } from '../src/app.js';
import { buildConfig } from '../src/config/index.js';
import { createLogger } from '../src/log/index.js';
import { startRelayStandin } from './relay.js';

async function main(): Promise<void> {
  const port = process.env.SLUICE_PORT ?? '8080';
  const adminPort = process.env.SLUICE_ADMIN_PORT ?? '9090';
  const relay = await startRelayStandin({ port: Number(process.env.DEMO_RELAY_PORT ?? 0), quiet: true });
  const adminToken = process.env.SLUICE_ADMIN_TOKEN ?? randomBytes(18).toString('base64url');
  const config = buildConfig(
    {},
    {
      SLUICE_UPSTREAM_URL: relay.url,
      SLUICE_PORT: port,
      SLUICE_ADMIN_PORT: adminPort,
      SLUICE_HOST: '127.0.0.1',
      SLUICE_ADMIN_HOST: '127.0.0.1',
      SLUICE_ADMIN_TOKEN: adminToken,
      SLUICE_LOG_LEVEL: process.env.SLUICE_LOG_LEVEL ?? 'warn',
    },
  );
  const sluice = createSluice({ config, log: createLogger(config.logLevel) });
  const bound = await sluice.listen();
  const { key } = await sluice.keys.create({ user: 'demo', name: 'demo key' });
  const base = `http://127.0.0.1:${bound.port}`;
  const admin = `http://127.0.0.1:${bound.adminPort}`;

  process.stdout.write(`
sluice demo is running (embedded store, relay stand-in at ${relay.url})

  public:  ${base}
  admin:   ${admin}   (token: ${adminToken})
  API key: ${key}      (user "demo")

OpenAI chat-completions (free model, counted against 20/min and 100/day):
  curl -s ${base}/v1/chat/completions -H "Authorization: Bearer ${key}" -H "content-type: application/json" \\
    -d '{"model":"vend-flash-free","messages":[{"role":"user","content":"hello"}]}'

Anthropic messages (x-api-key, as the messages protocol's clients send it):
  curl -s ${base}/v1/messages -H "x-api-key: ${key}" -H "anthropic-version: 2023-06-01" -H "content-type: application/json" \\
    -d '{"model":"vend-flash-free","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}'

Gemini generate-content (x-goog-api-key, model in the path), streamed:
  curl -sN "${base}/v1beta/models/vend-flash-free:streamGenerateContent?alt=sse" -H "x-goog-api-key: ${key}" \\
    -H "content-type: application/json" -d '{"contents":[{"parts":[{"text":"hello"}]}]}'

A wrong key (the contract's 401):
  curl -si ${base}/v1/models -H "Authorization: Bearer sk-wrong"

The free tier state of the demo user:
  curl -s ${admin}/admin/users/demo/limits -H "Authorization: Bearer ${adminToken}"

SDK examples: SLUICE_API_KEY=${key} npx tsx examples/openai.ts   (also anthropic.ts, genai.ts)
${config.logLevel === 'warn' ? 'Log: warnings only; SLUICE_LOG_LEVEL=info npm run demo writes an access line per request (docs/operations.md, Why 401).\n' : ''}Press Ctrl-C to stop.
`);

  const stop = (): void => {
    void Promise.allSettled([sluice.close(), relay.close()]).then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
