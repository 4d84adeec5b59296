/**
 * nginx as a reference proxy (when installed): one worker, keep-alive to the relay, logs off,
 * everything in a scratch directory. Sampled as master + worker.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findOnPath, freePort } from '../../test/support/redis.js';
import { adopt, type Server } from './proc.js';

export function nginxBinary(): string | undefined {
  return findOnPath('nginx') ?? ['/usr/sbin/nginx', '/usr/local/sbin/nginx'].find((p) => existsSync(p));
}

function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export async function startNginx(upstreamPort: number): Promise<Server | null> {
  const bin = nginxBinary();
  if (!bin) return null;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-nginx-'));
  const port = await freePort();
  const conf = `
worker_processes 1;
daemon off;
master_process on;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  upstream relay { server 127.0.0.1:${upstreamPort}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://relay;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
  writeFileSync(join(dir, 'nginx.conf'), conf);
  const child = spawn(bin, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  adopt(child);
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Ready when it answers on the port.
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`nginx exited: ${err}`);
    }
    try {
      const r = await fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`nginx did not answer within 10 s: ${err}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const pid = child.pid!;
  const version = err.match(/nginx\/[\d.]+/)?.[0] ?? '';
  return {
    name: 'nginx',
    pid,
    pids: () => [pid, ...childPids(pid)],
    info: { port, version },
    tail: () => err,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGQUIT');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
