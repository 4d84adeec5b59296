/**
 * The series selectors of a PromQL expression (`name{matchers}`), read with a small lexer: enough
 * for the expressions of deploy/observability (functions, aggregations with by/without, binary
 * operators with on/ignoring/group_*, ranges, offsets, strings, comments). Prometheus 2.42 has no
 * endpoint that returns a parsed query, so the tests read the names themselves.
 */

type Token = { kind: 'ident' | 'string' | 'number' | 'punct'; text: string };

/** Words that are not metric names where they stand alone (aggregations may be followed by `by (...)`). */
const KEYWORDS = new Set([
  ...['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'atan2', 'inf', 'nan'],
  ...['sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile'],
]);
/** Keywords followed by a parenthesised list of label names. */
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

function lex(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '#') {
      while (i < expr.length && expr[i] !== '\n') i++;
    } else if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < expr.length && expr[j] !== c) j += c !== '`' && expr[j] === '\\' ? 2 : 1;
      if (j >= expr.length) throw new Error(`unterminated string in: ${expr}`);
      tokens.push({ kind: 'string', text: expr.slice(i, j + 1) });
      i = j + 1;
    } else if (/[0-9.]/.test(c)) {
      const m = /^[0-9.][0-9a-zA-Z.]*/.exec(expr.slice(i))!;
      tokens.push({ kind: 'number', text: m[0] });
      i += m[0].length;
    } else if (/[a-zA-Z_:]/.test(c)) {
      const m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(expr.slice(i))!;
      tokens.push({ kind: 'ident', text: m[0] });
      i += m[0].length;
    } else if (c === '$') {
      throw new Error(`unsubstituted variable in: ${expr}`);
    } else {
      const m = /^(==|!=|>=|<=|=~|!~|.)/.exec(expr.slice(i))!;
      tokens.push({ kind: 'punct', text: m[0] });
      i += m[0].length;
    }
  }
  return tokens;
}

export interface Selector {
  /** The metric name. */
  name: string;
  /** The selector as written, matchers included: an instant-vector query of its own. */
  text: string;
}

/** Every series selector in `expr`, in order. A selector without a metric name is an error. */
export function selectors(expr: string): Selector[] {
  const t = lex(expr);
  const out: Selector[] = [];
  for (let i = 0; i < t.length; i++) {
    const tok = t[i]!;
    if (tok.kind === 'punct' && tok.text === '{') throw new Error(`a selector without a metric name in: ${expr}`);
    if (tok.kind !== 'ident') continue;
    const next = t[i + 1];
    if (LABEL_LISTS.has(tok.text)) {
      // Skip `( label, ... )`.
      if (next?.text === '(') while (i < t.length && t[i]!.text !== ')') i++;
      continue;
    }
    if (KEYWORDS.has(tok.text) || next?.text === '(') continue; // a keyword, a function or an aggregation
    let text = tok.text;
    if (next?.text === '{') {
      let j = i + 1;
      while (j < t.length && t[j]!.text !== '}') j++;
      if (j >= t.length) throw new Error(`unclosed matchers in: ${expr}`);
      text += t
        .slice(i + 1, j + 1)
        .map((x) => x.text)
        .join('');
      i = j;
    }
    out.push({ name: tok.text, text });
  }
  return out;
}
