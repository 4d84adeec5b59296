/**
 * Header fields as they came on the wire. Node joins a repeated field's lines with ", " (or keeps
 * only the first, for some), while the relay (Go) reads a field's first line alone: where the two
 * could differ, sluice counts the lines.
 */

/** How many lines of field `name` (lower case) a raw header list (name, value, name, value, ...) holds, in any case. */
export function fieldLines(raw: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const field = raw[i]!;
    if (field.length === name.length && field.toLowerCase() === name) n++;
  }
  return n;
}
