import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import {
  anyJsonValue,
  assertOpenAiError,
  brokenJson,
  chargeCount,
  deepNesting,
  fuzzParams,
  invalidUtf8,
  jsonWithBadUtf8,
  mutatedBody,
  preview,
  shown,
  walletSnapshot,
} from './fuzz-kit';

const MAX_BODY = 256 * 1024;

const validChat = {
  model: 'svc-pro',
  messages: [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: [{ type: 'text', text: 'hello' }] },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
  ],
  max_tokens: 16,
  temperature: 0.5,
  top_p: 1,
  n: 1,
  stop: ['zz'],
  seed: 7,
  user: 'u1',
  tools: [
    { type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object', properties: {} } } },
  ],
  tool_choice: 'auto',
  response_format: { type: 'text' },
  stream: false,
  stream_options: { include_usage: true },
};

const validResponse = {
  model: 'svc-pro',
  input: [
    { role: 'user', content: [{ type: 'input_text', text: 'hello' }] },
    { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
    { type: 'function_call_output', call_id: 'c1', output: 'ok' },
  ],
  instructions: 'be brief',
  max_output_tokens: 16,
  tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }],
  store: false,
  stream: false,
};

/** Bodies that can never be a valid request: the answer must be a 4xx error and nothing is charged. */
function invalidBodies(valid: Record<string, unknown>): fc.Arbitrary<Buffer> {
  return fc.oneof(
    brokenJson,
    invalidUtf8,
    deepNesting,
    anyJsonValue
      .filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
      .map((v) => Buffer.from(JSON.stringify(v))),
    // A well-formed JSON value nested far too deep inside a real field.
    fc
      .integer({ min: 1000, max: 5000 })
      .map((d) =>
        Buffer.from(JSON.stringify({ ...valid, model: 'svc-pro' }).replace('"svc-pro"', '['.repeat(d) + ']'.repeat(d))),
      ),
    // Bigger than the body limit.
    fc
      .integer({ min: MAX_BODY + 1, max: MAX_BODY * 3 })
      .map((n) => Buffer.from(JSON.stringify({ ...valid, pad: 'x'.repeat(n) }))),
  );
}

describe('fuzz: /v1/openai', function () {
  this.timeout(300_000);
  let svc: TestSvc;
  let funded: FundedKey;
  let successes = 0;

  before(async () => {
    svc = await startSvc({ maxBodyBytes: MAX_BODY });
    funded = await svc.createFundedKey(10_000_000_000n, 'fuzz');
  });
  after(async () => {
    await svc?.close();
  });

  async function post(path: string, body: Buffer, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${svc.baseUrl}/v1/openai${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${funded.key}`, 'content-type': 'application/json', ...headers },
      body: body,
    });
  }

  for (const [path, valid] of [
    ['/chat/completions', validChat],
    ['/responses', validResponse],
  ] as const) {
    it(`POST ${path}: the valid seed body succeeds (so the fuzzing below starts from a working request)`, async () => {
      const res = await post(path, Buffer.from(JSON.stringify(valid)));
      assert.equal(res.status, 200, await res.text());
      successes += 1;
    });

    it(`POST ${path}: invalid JSON, invalid UTF-8, deep nesting, non-objects, oversized bodies are 4xx errors from the table`, async () => {
      const before = await walletSnapshot(svc, funded.accountId);
      await fc.assert(
        fc.asyncProperty(shown(invalidBodies(valid)), async (body) => {
          const res = await post(path, body);
          const e = await assertOpenAiError(res, `${path} ${body.subarray(0, 60).toString('latin1')}`);
          if (res.status === 413) assert.equal(e.code, 'request_too_large');
        }),
        fuzzParams(40),
      );
      assert.equal(await walletSnapshot(svc, funded.accountId), before, 'no charge, no hold, no entry');
    });

    it(`POST ${path}: a wrong-typed or odd value at any field is a 400 (or a success that is charged once)`, async () => {
      await fc.assert(
        fc.asyncProperty(shown(fc.oneof(mutatedBody(valid), jsonWithBadUtf8(valid))), async (body) => {
          const res = await post(path, body);
          if (res.status === 200) {
            const json = (await res.json()) as Record<string, unknown>;
            assert.ok(typeof json['id'] === 'string', 'a success is a real completion/response');
            successes += 1;
            return;
          }
          await assertOpenAiError(res, `${path} ${preview(body)}`);
        }),
        fuzzParams(80),
      );
      const w = await svc.wallet(funded.accountId);
      assert.equal(w.held, 0n, 'no hold left open');
      assert.equal(await chargeCount(svc, funded.accountId), successes, 'one charge per success, none per error');
    });
  }

  it('GET /models/{id} and /responses/{id} with arbitrary ids: 404/400 from the table, never 500', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('models', 'responses'),
        fc.string({ minLength: 1, maxLength: 300 }),
        async (kind, id) => {
          fc.pre(id !== 'svc-pro' && !/^[./]+$/.test(id));
          const res = await fetch(`${svc.baseUrl}/v1/openai/${kind}/${encodeURIComponent(id)}`, {
            headers: { authorization: `Bearer ${funded.key}` },
          });
          if (res.status === 200) {
            assert.equal(kind, 'models', `${kind}/${id} answered 200`);
            return;
          }
          await assertOpenAiError(res, `${kind}/${id}`);
        },
      ),
      fuzzParams(60),
    );
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('arbitrary Authorization, Idempotency-Key and Content-Type headers: declared errors only', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const printable = fc.string({
      unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
      maxLength: 200,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          printable,
          printable.map((s) => `Bearer ${s}`),
          printable.map((s) => `Bearer svc_sk_${s}`),
          fc.constant('Bearer'),
        ),
        fc.constantFrom('/chat/completions', '/responses'),
        async (authorization, path) => {
          const res = await post(path, Buffer.from(JSON.stringify(path === '/responses' ? validResponse : validChat)), {
            authorization,
          });
          const e = await assertOpenAiError(res, `authorization ${authorization}`);
          assert.equal(res.status, 401, `${authorization}: ${e.code}`);
        },
      ),
      fuzzParams(60),
    );
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('a bad body with no key is 401 first, and a key with a bad body is 400: nothing charged either way', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const res = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, { method: 'POST', body: '{' });
    assert.equal((await assertOpenAiError(res, 'no key')).code, 'missing_api_key');
    const res2 = await post('/chat/completions', Buffer.from('{'));
    assert.equal(res2.status, 400);
    await assertOpenAiError(res2, 'bad body');
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });
});
