/**
 * A list of exchanges in flight, linked through the exchanges themselves: one per time bound the
 * Forwarder keeps (the relay's headers, an answer's silences), swept by one interval rather than
 * a timer per request. Not a Set: one entry added and deleted per request kept dead requests
 * alive through young-generation collections (docs/performance.md, bd4fc51).
 */
export interface Linked<T extends Linked<T>> {
  prev: T | null;
  next: T | null;
  /** The list it is in, if any: an exchange is in one at a time. */
  list: ExchangeList<T> | null;
}

export class ExchangeList<T extends Linked<T>> {
  /** Oldest first: entries join at the tail. */
  head: T | null = null;
  private tail: T | null = null;

  add(item: T): void {
    item.list?.remove(item);
    item.list = this;
    item.prev = this.tail;
    item.next = null;
    if (this.tail !== null) this.tail.next = item;
    else this.head = item;
    this.tail = item;
  }

  remove(item: T): void {
    if (item.list !== this) return;
    item.list = null;
    if (item.prev !== null) item.prev.next = item.next;
    else this.head = item.next;
    if (item.next !== null) item.next.prev = item.prev;
    else this.tail = item.prev;
    item.prev = item.next = null;
  }

  clear(): void {
    while (this.head !== null) this.remove(this.head);
  }
}
