import assert from 'node:assert/strict';
import { Metadata, Status } from 'nice-grpc';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { assertOpenAiError, walletSnapshot } from './fuzz-kit';

const nested = (depth: number): unknown => JSON.parse('{"a":'.repeat(depth) + '1' + '}'.repeat(depth));

// Inputs the fuzzers found answered 500; each stays here as a fixed case.
describe('fuzz regressions', function () {
  let svc: TestSvc;
  let funded: FundedKey;

  before(async () => {
    svc = await startSvc();
    funded = await svc.createFundedKey(1_000_000n, 'regressions');
  });
  after(async () => {
    await svc?.close();
  });

  async function post(path: string, body: unknown): Promise<Response> {
    return fetch(`${svc.baseUrl}/v1/openai${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${funded.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  it('JSON nested past the protobuf limit is a 400 naming the body (was 500: the core could not decode it)', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const cases: [string, unknown][] = [
      ['/responses', { model: 'svc-pro', input: 'hi', metadata: nested(40) }],
      ['/responses', nested(600)],
      [
        '/chat/completions',
        {
          model: 'svc-pro',
          messages: [{ role: 'user', content: 'hi' }],
          tools: [{ type: 'function', function: { name: 'f', parameters: nested(40) } }],
        },
      ],
    ];
    for (const [path, body] of cases) {
      const res = await post(path, body);
      assert.equal(res.status, 400, path);
      assert.equal((await assertOpenAiError(res, path)).param, 'body');
    }
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('nesting up to the limit still works', async () => {
    const res = await post('/responses', { model: 'svc-pro', input: 'hi', metadata: { deep: nested(29) } });
    // metadata values must be strings for OpenAI; either way it is a declared answer, not a 500.
    if (res.status !== 200) await assertOpenAiError(res, 'depth 31');
    const ok = await post('/chat/completions', {
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: nested(25) } }],
    });
    assert.equal(ok.status, 200, await ok.text());
  });

  it('a function_call_output whose output array holds a non-object is a 400 naming it (was 500)', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const res = await post('/responses', {
      model: 'svc-pro',
      input: [
        { role: 'user', content: 'hi' },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: [null] },
      ],
    });
    assert.equal(res.status, 400);
    assert.equal((await assertOpenAiError(res, 'output [null]')).param, 'input[2].output[0]');
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('MCP: a tools/call whose arguments nest past the limit is -32600, not -32603', async () => {
    const res = await fetch(`${svc.baseUrl}/v1/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'web_search', arguments: { query: 'x', extra: nested(40) } },
      }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: { code: number } };
    assert.equal(body.error.code, -32600);
  });

  it('an error quoting a huge input crosses the gRPC hop cut short (was: trailers past the HTTP/2 limit, the call hung until the connection dropped)', async () => {
    const metadata = new Metadata({ authorization: `Bearer ${funded.key}` });
    // The abort turns a hang into a wrong status instead of a mocha timeout.
    const error = await svc.connection.clients.chat
      .getResponse({ responseId: `resp_${'a'.repeat(300_000)}` }, { metadata, signal: AbortSignal.timeout(20_000) })
      .then(
        () => assert.fail('expected NOT_FOUND'),
        (e: { code?: number; details?: string }) => e,
      );
    assert.equal(error.code, Status.NOT_FOUND);
    assert.ok((error.details ?? '').length < 2000, 'the message is cut');
    const before = await walletSnapshot(svc, funded.accountId);
    const res = await post('/chat/completions', {
      model: 'm'.repeat(200_000),
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 404);
    assert.equal((await assertOpenAiError(res, 'huge model name')).code, 'model_not_found');
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
  });

  it('chat numbers past the wire types are 400s naming the field (was 500: the adapter could not encode them)', async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const base = { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] };
    for (const [field, value] of [
      ['seed', -9223372036854778000],
      ['seed', 2 ** 63],
      ['seed', 1e308],
      ['n', 2 ** 31],
      ['n', 1e308],
    ] as const) {
      const res = await post('/chat/completions', { ...base, [field]: value });
      assert.equal(res.status, 400, `${field}=${value}`);
      assert.equal((await assertOpenAiError(res, `${field}=${value}`)).param, field);
    }
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
    const ok = await post('/chat/completions', { ...base, seed: -(2 ** 63) });
    assert.equal(ok.status, 200, await ok.text());
  });
});
