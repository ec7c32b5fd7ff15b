import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ERROR_TABLE } from '../../core/errors';
import type { TestSvc } from '../helpers/harness';

/**
 * Runs per property: small in CI so the suite stays fast, `SVC_FUZZ_RUNS=N` for a long run.
 * Read here, in the test kit, because tests are their own composition root.
 */
export function fuzzRuns(ciDefault: number): number {
  const raw = process.env['SVC_FUZZ_RUNS'];
  const n = raw === undefined || raw === '' ? NaN : Number(raw);
  return Number.isInteger(n) && n > 0 ? n : ciDefault;
}

/** A fixed seed unless SVC_FUZZ_SEED is set, so a CI failure can be replayed exactly. */
export function fuzzParams(ciDefault: number): fc.Parameters<unknown> {
  const seed = Number(process.env['SVC_FUZZ_SEED'] ?? '');
  return { numRuns: fuzzRuns(ciDefault), ...(Number.isInteger(seed) && seed !== 0 ? { seed } : {}) };
}

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

/** Bytes that are not UTF-8: lone continuation bytes, overlongs, surrogates, truncated sequences. */
export const invalidUtf8 = fc
  .array(fc.constantFrom(0x80, 0xbf, 0xc0, 0xc1, 0xe0, 0xed, 0xf5, 0xff, 0xfe), { minLength: 1, maxLength: 8 })
  .map((bytes) => Buffer.from(bytes));

/** JSON text with a syntax error somewhere. */
export const brokenJson: fc.Arbitrary<Buffer> = fc
  .oneof(
    fc.constantFrom(
      '',
      '{',
      '}',
      '[',
      '{"a":',
      '{"a" 1}',
      "{'a':1}",
      '{"a":1,}',
      'nul',
      'NaN',
      '{"a":01}',
      '\u0000',
      '{"a":"\u0001"}',
      '"unterminated',
    ),
    fc.json().map((s) => s.slice(0, Math.max(0, s.length - 1)) + '}}'),
    fc.string({ maxLength: 200 }),
  )
  .map(utf8);

/** A valid JSON document with invalid UTF-8 bytes spliced into a string value. */
export const jsonWithBadUtf8 = (base: Record<string, unknown>): fc.Arbitrary<Buffer> =>
  invalidUtf8.map((bad) => {
    const text = JSON.stringify({ ...base, junk: '@@' });
    const at = text.indexOf('@@');
    return Buffer.concat([utf8(text.slice(0, at)), bad, utf8(text.slice(at + 2))]);
  });

/** Arrays or objects nested far deeper than any real request (JSON.parse must not blow the stack). */
export const deepNesting = fc
  .record({ depth: fc.integer({ min: 500, max: 20000 }), open: fc.constantFrom('[', '{"a":') })
  .map(({ depth, open }) => {
    const close = open === '[' ? ']' : '}';
    return utf8(open.repeat(depth) + '1' + close.repeat(depth));
  });

/** Any JSON value, including the wrong type for a whole body. */
export const anyJsonValue = fc.jsonValue({ maxDepth: 4 });

/**
 * Values of every JSON type, so that some are wrong for any given field: nulls, booleans,
 * numbers at the edges, long strings, arrays, objects, and numbers JSON cannot hold as integers.
 */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, '', ' ', '0', 'null', [], {}, [null], {
    '': '',
  }),
  fc.string({ maxLength: 50 }),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 5 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
  fc.integer({ min: 10_000, max: 200_000 }).map((n) => 'x'.repeat(n)),
  fc.integer({ min: 1_000, max: 50_000 }).map((n) => new Array<number>(n).fill(1)),
);

/** Paths (dotted, with numeric array indexes) of every field in a JSON value. */
export function fieldPaths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push([...prefix, i], ...fieldPaths(v, [...prefix, i]));
    });
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) out.push([...prefix, k], ...fieldPaths(v, [...prefix, k]));
  }
  return out;
}

/** A copy of `value` with the field at `path` replaced by `replacement`. */
export function setAt(value: unknown, path: readonly (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  const copy: unknown = Array.isArray(value) ? [...(value as unknown[])] : { ...(value as Record<string, unknown>) };
  const container = copy as Record<string | number, unknown>;
  container[head as string | number] = setAt(container[head as string | number], rest, replacement);
  return copy;
}

/** A valid body with one field (anywhere in it, nested too) replaced by a wrong-typed or odd value. */
export function mutatedBody(valid: Record<string, unknown>): fc.Arbitrary<Buffer> {
  const paths = fieldPaths(valid);
  return fc
    .record({
      path: fc.constantFrom(...paths),
      value: wrongValue,
      extra: fc.option(fc.tuple(fc.string({ maxLength: 10 }), wrongValue), { nil: undefined }),
    })
    .map(({ path, value, extra }) => {
      let body = setAt(valid, path, value) as Record<string, unknown>;
      // Unknown top-level fields, now and then, on top of the wrong type.
      if (extra !== undefined && extra[0] !== 'stream') body = { ...body, [extra[0]]: extra[1] };
      // Streaming answers are 200 with SSE frames; the non-streaming path is what is checked here.
      if (body['stream'] !== undefined) body = { ...body, stream: false };
      return utf8(JSON.stringify(body));
    });
}

/** Declared (http, openaiType, openaiCode) triples, from the one error table. */
const declaredOpenAi = new Set(
  Object.values(ERROR_TABLE).map((m) => `${m.http} ${m.openaiType} ${String(m.openaiCode)}`),
);

/** Asserts an HTTP answer is an OpenAI error JSON whose status, type and code are a row of the error table, not a 500. */
export async function assertOpenAiError(
  res: Response,
  context: string,
): Promise<{ type: string; code: string | null; param: string | null }> {
  const text = await res.text();
  assert.notEqual(res.status, 500, `${context}: 500 ${text}`);
  assert.ok(res.status >= 400 && res.status < 500, `${context}: status ${res.status} ${text}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/, `${context}: content-type`);
  assert.match(res.headers.get('x-request-id') ?? '', /\S/, `${context}: x-request-id`);
  const body = JSON.parse(text) as { error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } };
  const e = body.error;
  assert.ok(e !== undefined && typeof e === 'object', `${context}: no error object in ${text}`);
  assert.equal(typeof e.message, 'string', `${context}: message`);
  assert.ok((e.message as string).length > 0, `${context}: empty message`);
  assert.ok(e.param === null || typeof e.param === 'string', `${context}: param`);
  assert.ok(e.code === null || typeof e.code === 'string', `${context}: code`);
  assert.ok(
    declaredOpenAi.has(`${res.status} ${String(e.type)} ${String(e.code)}`),
    `${context}: ${res.status} ${String(e.type)}/${String(e.code)} is not a row of the error table`,
  );
  return { type: e.type as string, code: e.code as string | null, param: e.param as string | null };
}

/** The wallet and the number of ledger entries of an account, to compare before and after. */
export async function walletSnapshot(svc: TestSvc, accountId: string): Promise<string> {
  const w = await svc.wallet(accountId);
  const entries = await svc.ledger(accountId, 1000);
  return `balance=${w.balance} held=${w.held} entries=${entries.length}`;
}

/** Charges (negative entries) on an account's ledger. */
export async function chargeCount(svc: TestSvc, accountId: string): Promise<number> {
  return (await svc.ledger(accountId, 1000)).filter((e) => e.amount < 0n).length;
}

/** A short printable preview of a body, so a failing counterexample does not flood the report. */
export function preview(body: Buffer): string {
  if (body.length <= 2000) return body.toString('utf8');
  return `${body.subarray(0, 1000).toString('utf8')}… (${body.length} bytes) …${body.subarray(body.length - 500).toString('utf8')}`;
}

/** The same bodies, shown by fast-check as a short preview. */
export function shown(arb: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> {
  return arb.map((b) => Object.assign(b, { [fc.toStringMethod]: () => JSON.stringify(preview(b)) }));
}
