/**
 * Work gathered during one turn of the event loop and handled together at its end: the one way
 * sluice batches. The flush runs at `setImmediate`, in the check phase, after the poll phase has
 * read every socket that was ready, so everything a turn's requests asked for goes in one flush,
 * and waits microseconds for it, never a timer.
 *
 * Its users: forwarded requests leave for the relay together (src/forward/proxy.ts), the turn's
 * limit decisions go to Redis as one script run (src/store/redis/decisions.ts), the keys requests
 * wait for go to the relay database in one statement (src/auth/relay-db/source.ts), answers
 * sluice gives from memory leave with the turn's other answers (`atTurnEnd`, src/gateway.ts), and
 * the turn's access lines are built together (src/log/index.ts, `infoLine`).
 * docs/performance.md has the measurements behind each.
 */
export class TurnBatch<T> {
  private items: T[] = [];
  private due: NodeJS.Immediate | null = null;

  /** `flush` gets the turn's items in the order they were added; it runs once per turn that added any. */
  constructor(private readonly flush: (items: T[]) => void) {}

  /** Adds an item to this turn's batch; the first of a turn schedules the flush. */
  add(item: T): void {
    this.items.push(item);
    this.due ??= setImmediate(this.flushNow);
  }

  /** Flushes what the turn has added so far, now, instead of at the turn's end (nothing if none). */
  readonly flushNow = (): void => {
    if (this.due === null) return;
    clearImmediate(this.due);
    this.due = null;
    const items = this.items;
    this.items = [];
    this.flush(items);
  };

  /** Drops the turn's batch without flushing it (on close) and returns what it held. */
  cancel(): T[] {
    if (this.due !== null) clearImmediate(this.due);
    this.due = null;
    const items = this.items;
    this.items = [];
    return items;
  }
}

/** Whoever waits for the end of this turn, resumed together. */
const waiting = new TurnBatch<() => void>((resumes) => {
  for (const resume of resumes) resume();
});

/**
 * Resolves at the end of this turn. An answer sluice gives from memory (a refusal it remembers)
 * would otherwise be written the moment its request is read, one at a time: the client's next
 * request then arrives on its own, and each turn serves one or two requests, paying the turn's
 * fixed costs for each. Held to the turn's end, the turn's answers leave together, as the relay's
 * answers after a shared store round trip do, and the requests they call back arrive together.
 */
export function atTurnEnd(): Promise<void> {
  return new Promise<void>((resolve) => waiting.add(resolve));
}
