/**
 * How sluice stops. A drain (the Pod's shutdown hook, SIGTERM) stops the public listener
 * gracefully: no new connections, the open ones get up to `drainSeconds`, then what is left is cut.
 * Closing then runs a list of named steps in order, each bounded and logged, so that the order in
 * which the parts stop is data (src/app.ts lists it) and one part that hangs cannot hold the rest.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { stopListening } from '../http/listener.js';

export interface DrainOptions {
  seconds: number;
  log: Logger;
  /** Requests in flight now (those a cut ends). */
  inflight: () => number;
  /** Called when the bound passed, before what is left is cut: from then on a request that ends was cut by sluice. */
  onCut: () => void;
}

/** Stops `server` gracefully within `seconds`; resolves with how many requests were cut. */
export async function drain(server: Server, o: DrainOptions): Promise<{ forced: number }> {
  const deadline = Date.now() + o.seconds * 1000;
  o.log.info({ drainSeconds: o.seconds }, 'draining: not ready, no new connections');
  const closed = stopListening(server);
  // Idle keep-alive connections go now; busy ones close after their current answer.
  const idleSweep = setInterval(() => server.closeIdleConnections(), 250);
  const done = await Promise.race([closed.then(() => true), delay(Math.max(0, deadline - Date.now()), false)]);
  clearInterval(idleSweep);
  if (done) return { forced: 0 };
  const forced = o.inflight();
  o.log.warn({ forced, drainSeconds: o.seconds }, 'drain deadline passed; cutting what is still open (outcome drain_deadline)');
  o.onCut();
  server.closeAllConnections();
  // Their relay requests are aborted as the connections close: then nothing is in flight toward
  // the relay. (Bounded, as every wait: the sockets are destroyed already, so this takes a tick.)
  await Promise.race([closed, delay(1000, undefined)]);
  return { forced };
}

export interface CloseStep {
  name: string;
  run: () => unknown;
}

/** The longest one close step may take before the next runs regardless. */
export const CLOSE_STEP_MS = 5000;

/**
 * Runs `steps` in order, each to its end or for `boundMs` at most; a step that fails or overruns
 * is logged and the next runs all the same.
 */
export async function closeInOrder(steps: readonly CloseStep[], log: Logger, boundMs = CLOSE_STEP_MS): Promise<void> {
  for (const step of steps) {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const overrun = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), boundMs).unref();
    });
    try {
      const finished = await Promise.race([Promise.resolve(step.run()).then(() => true), overrun]);
      const ms = Math.round(performance.now() - started);
      if (finished) log.debug({ step: step.name, ms }, 'closed');
      else log.warn({ step: step.name, ms }, 'close step did not finish in time; going on');
    } catch (err) {
      log.warn({ step: step.name, err: err instanceof Error ? err.message : String(err) }, 'close step failed; going on');
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Resolves with `value` after `ms`, without keeping the process alive. */
function delay<T>(ms: number, value: T): Promise<T> {
  return new Promise((resolve) => setTimeout(() => resolve(value), ms).unref());
}
