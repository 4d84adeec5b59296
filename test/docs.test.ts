/**
 * The README and docs/ are read by someone who cloned the repository and nothing else: every link
 * must land on a file (and heading) inside it, and every docs page must be reachable from the
 * README's index.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OUTCOMES } from '../src/answers/outcome.js';
import { Refusals, SocketRefusals } from '../src/answers/refusals.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The page's prose: fenced code blocks blanked (their lines kept, so line numbers hold). */
function prose(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const open = /^\s*(```+|~~~+)/.exec(line);
    if (fence !== null) {
      if (open && open[1]!.startsWith(fence)) fence = null;
      return '';
    }
    if (open) {
      fence = open[1]!;
      return '';
    }
    return line;
  });
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(text)) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = h[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  page: string;
  line: number;
  target: string;
}

/** Every link a reader can follow: [text](target), <scheme:...> autolinks, bare URLs, href="...". */
function links(page: string, text: string): Link[] {
  const out: Link[] = [];
  prose(text).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, (code) => (code.includes('](') ? '' : code));
    const add = (target: string): void => void out.push({ page, line: i + 1, target });
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) add(m[1]!);
    for (const m of line.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi)) add(m[1]!);
    for (const m of line.matchAll(/href\s*=\s*["']([^"']*)["']/gi)) add(m[1]!);
    // A bare URL in prose becomes a link when rendered; inside inline code it stays text.
    const bare = line
      .replace(/`[^`]*`/g, '')
      .replace(/\]\([^)]*\)/g, '](…)')
      .replace(/<[a-z][a-z0-9+.-]*:[^>\s]+>/gi, '')
      .replace(/href\s*=\s*["'][^"']*["']/gi, '');
    for (const m of bare.matchAll(/\bhttps?:\/\/[^\s)>\]]+/gi)) add(m[0].replace(/[.,;:!?]+$/, ''));
  });
  return out;
}

/** Why a link fails, or null when it lands inside the repository on something that exists. */
function problem(link: Link): string | null {
  const { page, target } = link;
  if (target === '') return 'empty link';
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) return 'leaves the repository';
  const [path = '', anchor] = target.split('#', 2) as [string, string | undefined];
  const file = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), decodeURIComponent(path));
  const rel = relative(ROOT, file);
  if (rel.startsWith('..') || rel.split(sep).includes('node_modules')) return 'leaves the repository';
  if (!existsSync(file)) return `${rel} does not exist`;
  if (anchor === undefined) return null;
  if (statSync(file).isDirectory() || !file.endsWith('.md')) return `an anchor on ${rel}, which has no headings`;
  if (!anchors(readFileSync(file, 'utf8')).has(decodeURIComponent(anchor))) return `${rel} has no heading #${anchor}`;
  return null;
}

describe('README and docs/: links', () => {
  it('finds links, heading anchors and the ways out of the repository', () => {
    const text =
      '# Two words: a `code` (x)\n## Two words: a code x\n```\n# not a heading [a](b.md)\n```\n[see](docs/x.md#y) <https://a.example> and https://b.example, `https://c.example`\n';
    expect([...anchors(text)]).toEqual(['two-words-a-code-x', 'two-words-a-code-x-1']);
    expect(links('README.md', text).map((l) => l.target)).toEqual(['docs/x.md#y', 'https://a.example', 'https://b.example']);
    expect(problem({ page: 'docs/a.md', line: 1, target: '../../outside.md' })).toBe('leaves the repository');
    expect(problem({ page: 'docs/a.md', line: 1, target: 'http://example.com/' })).toBe('leaves the repository');
    expect(problem({ page: 'docs/a.md', line: 1, target: 'mailto:someone@example.com' })).toBe('leaves the repository');
    expect(problem({ page: 'README.md', line: 1, target: 'docs/no-such-page.md' })).toBe('docs/no-such-page.md does not exist');
    expect(problem({ page: 'README.md', line: 1, target: '#no-such-heading' })).toBe('README.md has no heading #no-such-heading');
    expect(problem({ page: 'docs/contract.md', line: 1, target: '../README.md#two-commands' })).toBeNull();
  });

  it.each(PAGES)('%s: every link lands on a file and heading inside the repository', (page) => {
    const broken = links(page, readFileSync(join(ROOT, page), 'utf8'))
      .map((l) => ({ l, why: problem(l) }))
      .filter((x) => x.why !== null)
      .map(({ l, why }) => `${l.page}:${l.line} (${l.target}): ${why}`);
    expect(broken).toEqual([]);
  });

  it('the README indexes every page of docs/', () => {
    const linked = new Set(links('README.md', readFileSync(join(ROOT, 'README.md'), 'utf8')).map((l) => relative(ROOT, resolve(ROOT, l.target.split('#')[0]!))));
    const missing = PAGES.filter((p) => p.startsWith('docs/') && !linked.has(p));
    expect(missing).toEqual([]);
  });
});

/** The rows of the table under `heading` in `page`, each as its cells (the header row and the rule left out). */
function tableRows(page: string, heading: string): string[][] {
  const lines = prose(readFileSync(join(ROOT, page), 'utf8'));
  const start = lines.findIndex((l) => l.replace(/^#+\s*/, '') === heading && l.startsWith('#'));
  if (start === -1) throw new Error(`${page} has no heading "${heading}"`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|')) continue;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows.slice(2);
}

describe('README: the answers clients get', () => {
  /** `<status> <code>` for each answer a row names; a bare answer's code is `*bare*`. */
  function readmeAnswers(): Set<string> {
    const out = new Set<string>();
    for (const [status, codes] of tableRows('README.md', 'The answers clients get')) {
      for (const m of codes!.matchAll(/`([^`]*)`|\*bare\*/g)) out.add(`${status} ${m[1] === undefined ? '*bare*' : m[1] === '""' ? '' : m[1]}`);
    }
    return out;
  }

  it('lists every answer of the refusal table, and nothing else', () => {
    const table = new Set([
      ...Object.values(Refusals).map((r) => `${r.status} ${r.body === null ? '*bare*' : r.body.code}`),
      ...Object.values(SocketRefusals).map((r) => `${r.status} *bare*`),
    ]);
    const readme = readmeAnswers();
    expect({ missingFromReadme: [...table].filter((a) => !readme.has(a)), notInTable: [...readme].filter((a) => !table.has(a)) }).toEqual({
      missingFromReadme: [],
      notInTable: [],
    });
  });
});

describe('docs/operations.md: the outcomes', () => {
  it('names every outcome in the metrics table, and nothing else', () => {
    const row = tableRows('docs/operations.md', 'Metrics').find((cells) => cells[0] === '`sluice_requests_total{family,outcome}`');
    const listed = row?.[1]?.split('outcome (`src/answers/outcome.ts`):')[1] ?? '';
    const named = new Set([...listed.matchAll(/`([a-z]+(?:_[a-z]+)*)`/g)].map((m) => m[1]!));
    expect([...named].sort()).toEqual([...OUTCOMES].sort());
  });
});
