/**
 * Reads the structure of a JSON body while it arrives, so that finding `model` once the last byte
 * is in takes a walk over the top-level keys only. Scanning a large body of small chat messages in
 * one go holds the event loop (every open stream waits) for as long as the scan takes; spread
 * over the chunks as they come, the same work is done in small slices, overlapped with the upload.
 *
 * It records, by byte offset, where each large top-level string and nested container ends. The
 * final scan (scan.ts) still walks the top level itself and only asks "where does the thing that
 * starts here end?", so these hints can make it faster but never change its answer: an end is
 * recorded only for a start that the final scan's own rules would see in the same state (outside
 * a string, inside the top-level object), and from the same start the same rules reach the same
 * end. Anything the final scan would refuse (mismatched brackets, nesting too deep) stops the
 * recording, and the final scan then finds the fault on its own.
 */

// The depth limit must be the final scan's own, or a hint could let through nesting it refuses.
import { INLINE_STRING_SCAN, MAX_DEPTH } from './scan.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const RBRACKET = 0x5d;

export interface StructureHints {
  /** Offset just past the closing bracket, by the offset of a nested container's opening bracket. */
  containerEnd(start: number): number | undefined;
  /** Offset of the closing quote, by the offset of a string's first content byte. */
  stringEnd(contentStart: number): number | undefined;
}

export class ModelPrepass implements StructureHints {
  private readonly containers = new Map<number, number>();
  private readonly strings = new Map<number, number>();
  /** Absolute offset of the next byte fed. */
  private offset = 0;
  /** 0 before the top-level object, 1 inside it, more inside nested containers. */
  private depth = 0;
  private inString = false;
  /** Inside a string, the next byte is escaped (a backslash ended the previous chunk). */
  private escaped = false;
  /** Closers expected for the nested containers open below the top level. */
  private readonly closers: number[] = [];
  /** Start of the top-level string or nested container being read. */
  private startedAt = -1;
  private stopped = false;

  /** @param minLength only strings and containers at least this long are recorded (shorter ones are cheap to rescan) */
  constructor(private readonly minLength = 256) {}

  containerEnd(start: number): number | undefined {
    return this.containers.get(start);
  }

  stringEnd(contentStart: number): number | undefined {
    return this.strings.get(contentStart);
  }

  feed(chunk: Buffer): void {
    const base = this.offset;
    const len = chunk.length;
    this.offset += len;
    if (this.stopped) return;
    let i = 0;
    while (i < len) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          i++;
          continue;
        }
        const q = this.closingQuote(chunk, i);
        if (q === -1) break; // the string goes on in the next chunk
        this.inString = false;
        if (this.depth === 1 && q + base - this.startedAt >= this.minLength) this.strings.set(this.startedAt, base + q);
        i = q + 1;
        continue;
      }
      const c = chunk[i]!;
      if (c === QUOTE) {
        this.inString = true;
        if (this.depth === 1) this.startedAt = base + i + 1;
      } else if ((c | 0x20) === LBRACE) {
        // `[` and `{` differ only in bit 0x20, as do `]` and `}`.
        if (this.depth === 0) {
          if (c !== LBRACE) return this.stop(); // not an object: scan.ts does not look further
        } else {
          if (this.closers.length + 2 > MAX_DEPTH) return this.stop();
          if (this.depth === 1) this.startedAt = base + i;
          this.closers.push(c === LBRACE ? RBRACE : RBRACKET);
        }
        this.depth++;
      } else if ((c | 0x20) === RBRACE) {
        if (this.depth <= 1) return this.stop(); // the top level is the final scan's to judge
        if (this.closers.pop() !== c) return this.stop();
        this.depth--;
        if (this.depth === 1 && base + i + 1 - this.startedAt >= this.minLength) this.containers.set(this.startedAt, base + i + 1);
      }
      i++;
    }
  }

  /**
   * Index in `chunk` of the quote that closes the current string, or -1 when the chunk ends first
   * (then `escaped` says whether its last byte escapes the next chunk's first).
   */
  private closingQuote(chunk: Buffer, from: number): number {
    const len = chunk.length;
    let pos = from;
    const inlineLimit = Math.min(pos + INLINE_STRING_SCAN, len);
    while (pos < inlineLimit) {
      const c = chunk[pos];
      if (c === QUOTE) return pos;
      if (c === BACKSLASH) {
        if (pos + 1 === len) {
          this.escaped = true;
          return -1;
        }
        pos += 2;
      } else {
        pos++;
      }
    }
    // From `pos` on no byte is escaped by one before it, so backslash runs are counted from there.
    const runStart = pos;
    for (;;) {
      const q = pos < len ? chunk.indexOf(QUOTE, pos) : -1;
      if (q === -1) {
        let k = len - 1;
        while (k >= runStart && chunk[k] === BACKSLASH) k--;
        this.escaped = ((len - 1 - k) & 1) === 1;
        return -1;
      }
      let k = q - 1;
      while (k >= runStart && chunk[k] === BACKSLASH) k--;
      if (((q - 1 - k) & 1) === 0) return q;
      pos = q + 1;
    }
  }

  private stop(): void {
    this.stopped = true;
  }
}
