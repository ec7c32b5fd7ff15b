import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import {
  brokenJson,
  chargeCount,
  deepNesting,
  fuzzParams,
  invalidUtf8,
  jsonWithBadUtf8,
  mutatedBody,
  shown,
  walletSnapshot,
} from './fuzz-kit';

const MAX_BODY = 128 * 1024;
// JSON-RPC's own codes and the ones the error table declares; -32603 (internal) is never fine.
const DECLARED_CODES = new Set([-32700, -32600, -32601, -32602, -32001, -32002, -32003, -32029, -32020, -32022]);

const validCalls: Record<string, unknown>[] = [
  {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'web_search', arguments: { query: 'tehran weather', max_results: 3 } },
  },
  {
    jsonrpc: '2.0',
    id: 'a',
    method: 'tools/call',
    params: { name: 'maps_search_places', arguments: { query: 'cafe', latitude: 35.7, longitude: 51.4, limit: 5 } },
  },
  {
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/call',
    params: {
      name: 'shopping_search',
      arguments: { query: 'laptop', limit: 3, min_price_toman: 1000, max_price_toman: 90_000_000, sort: 'price_asc' },
    },
  },
  {
    jsonrpc: '2.0',
    id: 3,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } },
  },
  { jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} },
];

interface RpcAnswer {
  readonly jsonrpc?: unknown;
  readonly id?: unknown;
  readonly result?: { isError?: boolean; _meta?: Record<string, unknown> };
  readonly error?: { code?: unknown; message?: unknown };
}

/** The one JSON-RPC message of a 200, sent as JSON or as one SSE event. */
async function readAnswer(res: Response): Promise<RpcAnswer> {
  const text = await res.text();
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const data = text.split('\n').find((line) => line.startsWith('data: '));
    assert.ok(data !== undefined, `no data frame in ${text}`);
    return JSON.parse(data.slice('data: '.length)) as RpcAnswer;
  }
  return JSON.parse(text) as RpcAnswer;
}

/** A tool result that was charged: not an error, and it states its cost. */
function isPaid(answer: RpcAnswer): boolean {
  const cost = answer.result?._meta?.['svc/cost'];
  return answer.result?.isError !== true && typeof cost === 'number' && cost > 0;
}

describe('fuzz: /v1/mcp', function () {
  this.timeout(300_000);
  let svc: TestSvc;
  let funded: FundedKey;
  let paidResults = 0;

  before(async () => {
    svc = await startSvc({ maxBodyBytes: MAX_BODY });
    funded = await svc.createFundedKey(10_000_000_000n, 'fuzz-mcp');
  });
  after(async () => {
    await svc?.close();
  });

  async function post(body: Buffer, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${svc.baseUrl}/v1/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body,
    });
  }

  /** Asserts a JSON-RPC error answer with a declared code; returns it. */
  async function assertRpcError(res: Response, context: string): Promise<RpcAnswer> {
    const text = await res.text();
    assert.ok(res.status !== 500, `${context}: HTTP 500 ${text}`);
    const body = JSON.parse(text) as RpcAnswer;
    assert.equal(body.jsonrpc, '2.0', `${context}: ${text}`);
    assert.ok(body.error !== undefined, `${context}: no error in ${text}`);
    assert.ok(DECLARED_CODES.has(body.error.code as number), `${context}: code ${String(body.error.code)} ${text}`);
    assert.equal(typeof body.error.message, 'string');
    return body;
  }

  it('the valid seed messages succeed', async () => {
    for (const call of validCalls) {
      const res = await post(Buffer.from(JSON.stringify(call)));
      assert.equal(res.status, 200);
      const body = (await res.json()) as RpcAnswer;
      assert.ok(body.result !== undefined && body.result.isError !== true, JSON.stringify(body));
      if (call['method'] === 'tools/call') paidResults += 1;
    }
  });

  it('broken JSON, invalid UTF-8, deep nesting, batches, non-objects, oversized bodies: 4xx with -32700/-32600/-32602, no charge', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const bodies = fc.oneof(
      brokenJson,
      invalidUtf8,
      deepNesting,
      fc
        .array(fc.constantFrom(...validCalls), { minLength: 1, maxLength: 3 })
        .map((b) => Buffer.from(JSON.stringify(b))),
      fc
        .jsonValue({ maxDepth: 2 })
        .filter((v) => v === null || typeof v !== 'object')
        .map((v) => Buffer.from(JSON.stringify(v))),
      fc
        .integer({ min: MAX_BODY + 1, max: MAX_BODY * 2 })
        .map((n) => Buffer.from(JSON.stringify({ ...validCalls[0], pad: 'x'.repeat(n) }))),
    );
    await fc.assert(
      // As a 2025-06-18 client: batches are refused there (2025-03-26 accepts them).
      fc.asyncProperty(shown(bodies), async (body) => {
        const res = await post(body, { 'mcp-protocol-version': '2025-06-18' });
        assert.ok(res.status === 400 || res.status === 413, `status ${res.status}`);
        await assertRpcError(res, 'broken body');
      }),
      fuzzParams(40),
    );
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('a wrong-typed or odd value at any field of a message: a declared error or a result, charged only for a successful tool call', async () => {
    const bodies = fc.oneof(
      ...validCalls.map((c) => mutatedBody(c)),
      ...validCalls.slice(0, 3).map((c) => jsonWithBadUtf8(c)),
    );
    await fc.assert(
      fc.asyncProperty(shown(bodies), async (body) => {
        const res = await post(body);
        if (res.status === 202) return; // a notification (no id) or a response: no answer, no work
        if (res.status === 200) {
          const answer = await readAnswer(res);
          if (answer.error !== undefined) {
            assert.ok(DECLARED_CODES.has(answer.error.code as number), `code ${JSON.stringify(answer)}`);
            return;
          }
          assert.ok(answer.result !== undefined, JSON.stringify(answer));
          if (isPaid(answer)) paidResults += 1;
          return;
        }
        await assertRpcError(res, `status ${res.status}`);
      }),
      fuzzParams(100),
    );
    const w = await svc.wallet(funded.accountId);
    assert.equal(w.held, 0n, 'no hold left open');
    assert.equal(await chargeCount(svc, funded.accountId), paidResults, 'one charge per successful tool call');
  });

  it('arbitrary Accept, Content-Type, MCP-Protocol-Version, Origin and Authorization headers: declared statuses and codes only', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const token = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      maxLength: 120,
    });
    const headers = fc.record(
      {
        accept: fc.oneof(token, fc.constantFrom('text/html', 'application/json;q=0', 'text/event-stream', '*/*;q=0.1')),
        'content-type': fc.oneof(
          token,
          fc.constantFrom('text/plain', 'application/json; charset=latin1', 'multipart/form-data'),
        ),
        'mcp-protocol-version': fc.oneof(token, fc.constantFrom('2024-11-05', '2025-06-18', '')),
        origin: fc.oneof(token, fc.constantFrom('https://evil.example', 'null', 'http://localhost')),
        authorization: fc.oneof(
          token,
          token.map((t) => `Bearer svc_sk_${t}`),
        ),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(headers, fc.constantFrom(...validCalls), async (h, call) => {
        const sent = Object.fromEntries(
          Object.entries(h)
            .map(([k, v]) => [k, v.trim()])
            .filter(([, v]) => v !== ''),
        );
        const res = await post(Buffer.from(JSON.stringify(call)), sent);
        if (res.status === 200) {
          const answer = await readAnswer(res);
          if (answer.error !== undefined) {
            assert.ok(DECLARED_CODES.has(answer.error.code as number), JSON.stringify(answer));
            return;
          }
          // Only headers that change nothing about who pays can lead to a success.
          assert.ok(!('authorization' in sent), `a fuzzed key was accepted: ${JSON.stringify(answer)}`);
          if (isPaid(answer)) paidResults += 1;
          return;
        }
        assert.ok([400, 401, 403, 406, 415].includes(res.status), `status ${res.status}`);
        await assertRpcError(res, `headers ${JSON.stringify(sent)}`);
        if (res.status === 401)
          assert.match(
            res.headers.get('www-authenticate') ?? '',
            /^Bearer realm="svc"(, error="invalid_token")?, resource_metadata="[^"]+"$/,
          );
      }),
      fuzzParams(80),
    );
    assert.ok(before.length > 0);
    assert.equal(await chargeCount(svc, funded.accountId), paidResults);
    assert.equal((await svc.wallet(funded.accountId)).held, 0n);
  });

  it('GET, DELETE, PUT and other paths: 404/405 JSON-RPC errors', async () => {
    for (const [method, path] of [
      ['GET', ''],
      ['DELETE', ''],
      ['PUT', ''],
      ['POST', '/x'],
      ['GET', '/tools'],
    ] as const) {
      const res = await fetch(`${svc.baseUrl}/v1/mcp${path}`, {
        method,
        headers: { authorization: `Bearer ${funded.key}` },
      });
      assert.ok([404, 405].includes(res.status), `${method} ${path}: ${res.status}`);
      if (res.headers.get('content-type')?.includes('json') === true) await assertRpcError(res, `${method} ${path}`);
    }
  });
});
