/**
 * The end of the current event-loop turn, as one promise shared by everyone who waits for it.
 *
 * An answer sluice gives from memory (a refusal it remembers) would otherwise be written the
 * moment its request is read, one at a time: the client's next request then arrives on its own,
 * and each turn of the loop serves one or two requests, paying the turn's fixed costs for each.
 * Answers held to the turn's end leave together, as the relay's answers after a shared store
 * round trip do, and the requests they call back arrive together in the next turn.
 * (src/forward/proxy.ts releases forwarded requests the same way, for the relay's sake.)
 */
let pending: Promise<void> | null = null;

function release(resolve: () => void): void {
  pending = null;
  resolve();
}

/** Resolves at the end of this turn (the check phase, after every socket the poll phase found ready has been read). */
export function atTurnEnd(): Promise<void> {
  if (pending === null) pending = new Promise<void>((resolve) => setImmediate(release, resolve));
  return pending;
}
