import { describe, expect, it, vi } from 'vitest';
import { parseConfigText, parseConfigTextOffLoop } from './yaml.js';

describe('parsing the config file', () => {
  it('gives the same mapping, and the same refusals, on the event loop and off it', async () => {
    const cases: Array<[string, unknown]> = [
      ['freeTier:\n  perMinute: 3\n  models: [a, b]\n', { freeTier: { perMinute: 3, models: ['a', 'b'] } }],
      ['{"port": 8081}', { port: 8081 }],
      ['', {}],
      ['# only a comment\n', {}],
    ];
    for (const [text, doc] of cases) {
      expect(parseConfigText('/c.yaml', text)).toEqual(doc);
      expect(await parseConfigTextOffLoop('/c.yaml', text)).toEqual(doc);
    }
    for (const [text, message] of [
      ['a: [1, 2', /^config file \/c\.yaml is not valid YAML: /],
      ['a: 1\na: 2\n', /^config file \/c\.yaml is not valid YAML: .*unique/],
      ['- 1\n- 2\n', /^config file \/c\.yaml must hold a mapping at its top level$/],
    ] as const) {
      expect(() => parseConfigText('/c.yaml', text)).toThrow(message);
      await expect(parseConfigTextOffLoop('/c.yaml', text)).rejects.toThrow(message);
    }
  });

  it('says where a syntax error is without quoting the lines around it (a secret may stand there)', async () => {
    for (const text of [
      'upstream:\n  credential: "S3cretPass42-credential\nredis:\n  url: redis://:S3cretPass42@127.0.0.1:6379/0\n',
      'redis:\n  url: redis://:S3cretPass42@127.0.0.1:6379/0 : oops\n',
      'upstream:\n  credential: S3cretPass42\n\tport: 1\n',
      'upstream:\n  credential: "S3\\qcretPass42"\n',
      'upstream:\n  credential: "\\xS3cretPass42"\n',
      'upstream:\n  credential: "\\uS3cretPass42"\n',
      'upstream:\n  credential: |S3cretPass42\n    x\n',
      'upstream:\n  credential: !! x\n',
      'upstream:\n  credential: *S3cretPass42\n',
      '%YAML 9.S3cretPass42\n---\na: 1\n',
    ]) {
      for (const message of [
        (() => {
          try {
            parseConfigText('/c.yaml', text);
          } catch (err) {
            return (err as Error).message;
          }
        })(),
        await parseConfigTextOffLoop('/c.yaml', text).then(
          () => undefined,
          (err: Error) => err.message,
        ),
      ]) {
        // Where, but for an alias without its anchor (found once the document is built: no position).
        expect(message).toMatch(/^config file \/c\.yaml is not valid YAML: (?:.* at line \d+, column \d+|Unresolved alias)$/);
        // Not even the part of it an escape sequence or a block header took.
        expect(message).not.toMatch(/S3/);
      }
    }
  });

  it('takes an unknown tag or directive without printing the line it stands on (a warning yaml would print on stderr)', () => {
    const warn = vi.spyOn(process, 'emitWarning');
    try {
      for (const text of ['upstream:\n  credential: !S3cretPass42 x\n', 'upstream:\n  credential: !<S3cretPass42> x\n', '%S3cretPass42 x\n---\na: 1\n']) {
        expect(parseConfigText('/c.yaml', text)).toBeTypeOf('object');
      }
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
