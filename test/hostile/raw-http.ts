/**
 * HTTP/1.1 over a raw socket, for requests no client library would send as written: `fetch` and
 * URL parsers resolve `..` segments and fix up headers before anything leaves the process.
 */
import net from 'node:net';

export interface RawAnswer {
  status: number;
  /** Lower-cased names; repeated fields joined with ", ". */
  headers: Record<string, string>;
  body: string;
}

/** Sends `head` (request line and header lines, no trailing blank line) and `body`; reads one answer. */
export function rawRequest(port: number, head: string, body = ''): Promise<RawAnswer> {
  const withLength = body === '' || /\r\ncontent-length:/i.test(head) ? head : `${head}\r\nContent-Length: ${Buffer.byteLength(body)}`;
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no complete answer to ${head.split('\r\n')[0]}`));
    }, 5_000);
    const tryParse = (ended: boolean): void => {
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const lines = buf.toString('latin1', 0, end).split('\r\n');
      const status = Number(lines[0]!.split(' ')[1]);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const c = l.indexOf(':');
        const name = l.slice(0, c).trim().toLowerCase();
        const value = l.slice(c + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      const rest = buf.subarray(end + 4);
      const length = headers['content-length'];
      if (length !== undefined ? rest.length < Number(length) : !ended && status !== 204 && status !== 304) return;
      clearTimeout(timer);
      s.destroy();
      resolve({ status, headers, body: rest.subarray(0, length !== undefined ? Number(length) : rest.length).toString('utf8') });
    };
    s.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      tryParse(false);
    });
    s.on('end', () => tryParse(true));
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    s.write(`${withLength}\r\n\r\n${body}`);
  });
}
