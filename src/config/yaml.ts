/**
 * The config file's text parsed (YAML; JSON is YAML). At start-up on the event loop, since nothing
 * is served yet; on a reload in a worker thread, bounded in time and memory. The `yaml` library
 * takes far longer than the 1 MiB read bound suggests: 1 MiB of flow collections or of keys in one
 * mapping took seconds and more heap than PARSE_HEAP_MB, all of which, on the event loop, every
 * request would wait out, and the heap could not hold.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from './error.js';
import { isObject, type Raw } from './read.js';

/** A reload's parse that takes longer is refused (a real config parses in milliseconds). */
export const PARSE_TIMEOUT_MS = 5000;
/** The heap a reload's parse may use; past it the worker stops and the reload is refused. */
export const PARSE_HEAP_MB = 64;

/**
 * A warning (an unknown tag or directive) is no error, and yaml would print it on stderr with the
 * line it stands on.
 */
const PARSE_OPTIONS = { logLevel: 'error' } as const;

/**
 * Messages of the parser that quote the document after their first words (an escape sequence, a
 * tag, a directive, a key): only those words are kept.
 */
const QUOTING =
  /^(Invalid escape sequence|Unresolved tag|Not a valid tag|Could not resolve tag|Block scalar header includes extra characters|Unknown directive|Ordered maps must not include duplicate keys|Unresolved plain scalar|Verbatim tags aren't resolved|Unresolved alias|Unsupported YAML version|The(?= \S+ tag has no suffix))\b.*?(?= at line \d+, column \d+$|$)/;

/**
 * The parser's message without what it quotes of the file (a secret may stand there): the lines
 * after its first, and any text of the document in the first. What is wrong, and where (`at line 6,
 * column 1`).
 */
export function yamlProblem(message: string): string {
  const first = message.split('\n', 1)[0]!.replace(/:\s*$/, '');
  return first.replace(QUOTING, (_all, words: string) => (words === 'The' ? 'A tag has no suffix' : words));
}

function notYaml(path: string, message: string): ConfigError {
  return new ConfigError(`config file ${path} is not valid YAML: ${yamlProblem(message)}`);
}

/** The parsed document as the settings reader takes it: a mapping, or nothing. */
function asMapping(path: string, doc: unknown): Raw {
  if (doc === null || doc === undefined) return {};
  if (!isObject(doc)) throw new ConfigError(`config file ${path} must hold a mapping at its top level`);
  return doc;
}

/** At start-up (and `sluice config check`): parsed on the calling thread. */
export function parseConfigText(path: string, text: string): Raw {
  let doc: unknown;
  try {
    doc = parseYaml(text, PARSE_OPTIONS);
  } catch (err) {
    throw notYaml(path, err instanceof Error ? err.message : String(err));
  }
  return asMapping(path, doc);
}

/**
 * The worker's code: CommonJS given as text, so that it runs the same under `tsx`, vitest and the
 * compiled image, with `yaml` loaded from where this module resolves it.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { parse } = require(workerData.yaml);
let message;
try {
  message = { ok: true, doc: parse(workerData.text, { logLevel: 'error' }) };
} catch (err) {
  message = { ok: false, error: err instanceof Error ? err.message : String(err) };
}
try {
  parentPort.postMessage(message);
} catch (err) {
  parentPort.postMessage({ ok: false, error: 'the parsed document cannot be handed over: ' + err.message });
}
`;

let yamlPath: string | undefined;

type Parsed = { ok: true; doc: unknown } | { ok: false; error: string };

/** On a reload: parsed in a worker thread, which is stopped at PARSE_TIMEOUT_MS or PARSE_HEAP_MB. */
export function parseConfigTextOffLoop(path: string, text: string): Promise<Raw> {
  yamlPath ??= createRequire(import.meta.url).resolve('yaml');
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { yaml: yamlPath, text },
      // Not the parent's flags (a loader such as tsx would be loaded again for nothing).
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: PARSE_HEAP_MB, maxYoungGenerationSizeMb: 16 },
      stdout: true,
      stderr: true,
    });
    let settled = false;
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      fn();
    };
    const timer = setTimeout(
      () => settle(() => reject(new ConfigError(`config file ${path} took more than ${PARSE_TIMEOUT_MS / 1000} s to parse; it is refused`))),
      PARSE_TIMEOUT_MS,
    );
    // Neither keeps a stopping process alive.
    timer.unref();
    worker.unref();
    worker.on('message', (m: Parsed) =>
      settle(() => {
        if (!m.ok) return reject(notYaml(path, m.error));
        try {
          resolve(asMapping(path, m.doc));
        } catch (err) {
          reject(err as Error);
        }
      }),
    );
    worker.on('error', (err: NodeJS.ErrnoException) =>
      settle(() =>
        reject(
          new ConfigError(
            err.code === 'ERR_WORKER_OUT_OF_MEMORY'
              ? `config file ${path} needs more than ${PARSE_HEAP_MB} MB to parse; it is refused`
              : `config file ${path} could not be parsed: ${err.message}`,
          ),
        ),
      ),
    );
    worker.on('exit', (code) => settle(() => reject(new ConfigError(`config file ${path} could not be parsed: the parser stopped (exit ${code})`))));
  });
}
