import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertMcpResponse } from '../helpers/mcp-schema';
import { post, toolCall, type RawReply } from './helpers';

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-test', version: '1' } },
};

// Arguments that fail validation come back as a tool result with isError (2025-11-25), not -32602.
const TOOL_ERROR = 0;

function rpcError(reply: RawReply): { code: number; message: string; data?: Record<string, unknown> } {
  assertMcpResponse(reply.message, 'Result');
  const error = reply.message?.['error'] as
    { code: number; message: string; data?: Record<string, unknown> } | undefined;
  assert.ok(error !== undefined, `expected a JSON-RPC error, got ${reply.text}`);
  return error;
}

describe('MCP transport and protocol (stateless Streamable HTTP, SPEC §8)', () => {
  let svc: TestSvc;
  let key: string;
  let accountId: string;
  const auth = (): Record<string, string> => ({ authorization: `Bearer ${key}` });

  before(async () => {
    // The built-in configuration: every tool on its sandbox provider.
    svc = await startSvc();
    ({ key, accountId } = await svc.createFundedKey(100_000));
  });
  after(async () => {
    await svc?.close();
  });

  it('initialize answers JSON with the negotiated version, no session id', async () => {
    const reply = await post(svc.baseUrl, INIT, auth());
    assert.equal(reply.status, 200);
    assert.match(reply.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(reply.headers.get('mcp-session-id'), null);
    assert.ok(reply.headers.get('x-request-id'));
    assertMcpResponse(reply.message, 'InitializeResult');
    assert.equal((reply.message?.['result'] as { protocolVersion: string }).protocolVersion, '2025-06-18');
  });

  for (const [asked, answered] of [
    ['2025-06-18', '2025-06-18'],
    ['2025-11-25', '2025-11-25'],
    ['2025-03-26', '2025-03-26'],
    ['2024-11-05', '2024-11-05'],
    ['1999-01-01', '2025-11-25'],
    ['2026-07-28', '2025-11-25'],
  ]) {
    it(`negotiates: a client asking for ${asked} gets ${answered}`, async () => {
      const reply = await post(svc.baseUrl, { ...INIT, params: { ...INIT.params, protocolVersion: asked } }, auth());
      assert.equal((reply.message?.['result'] as { protocolVersion: string }).protocolVersion, answered);
    });
  }

  it('answers text/event-stream when the client prefers it', async () => {
    const reply = await post(
      svc.baseUrl,
      { jsonrpc: '2.0', id: 'p', method: 'ping' },
      { ...auth(), accept: 'text/event-stream' },
    );
    assert.equal(reply.status, 200);
    assert.match(reply.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.match(reply.text, /^event: message\ndata: /);
    assert.deepEqual(reply.message, { jsonrpc: '2.0', id: 'p', result: {} });
  });

  it('tools/call over SSE carries the same result', async () => {
    const reply = await post(svc.baseUrl, toolCall('maps_search_places', { query: 'داروخانه' }), {
      ...auth(),
      accept: 'application/json;q=0.5, text/event-stream',
    });
    assert.match(reply.headers.get('content-type') ?? '', /^text\/event-stream/);
    assertMcpResponse(reply.message, 'CallToolResult');
    const result = reply.message?.['result'] as { structuredContent: { sandbox: boolean; notice: string } };
    assert.equal(result.structuredContent.sandbox, true);
    assert.match(result.structuredContent.notice, /Sandbox data/);
  });

  it('notifications and responses get 202 with no body', async () => {
    const note = await post(svc.baseUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, auth());
    assert.equal(note.status, 202);
    assert.equal(note.text, '');
    const response = await post(svc.baseUrl, { jsonrpc: '2.0', id: 5, result: {} }, auth());
    assert.equal(response.status, 202);
  });

  it('web_search takes max_results up to 20', async () => {
    const reply = await post(svc.baseUrl, toolCall('web_search', { query: 'MCP', max_results: 20 }), auth());
    const result = reply.message?.['result'] as { isError: boolean };
    assert.equal(result.isError, false, reply.text);
  });

  describe('2025-03-26 batches', () => {
    const v2025 = (): Record<string, string> => ({ ...auth(), 'mcp-protocol-version': '2025-03-26' });

    it('answers each request of a batch in one array, notifications silently', async () => {
      const reply = await post(
        svc.baseUrl,
        [
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', id: 'a', method: 'tools/list' },
          toolCall('shopping_search', { query: 'گوشی' }, 'b'),
          { jsonrpc: '2.0', id: 'c', method: 'nope' },
        ],
        v2025(),
      );
      assert.equal(reply.status, 200, reply.text);
      const messages = JSON.parse(
        reply.headers.get('content-type')?.startsWith('text/event-stream') === true
          ? (reply.text.split('\n').find((l) => l.startsWith('data: ')) ?? '').slice(6)
          : reply.text,
      ) as Array<Record<string, unknown>>;
      assert.deepEqual(
        messages.map((m) => m['id']),
        ['a', 'b', 'c'],
      );
      assertMcpResponse(messages[0], 'ListToolsResult');
      assertMcpResponse(messages[1], 'CallToolResult');
      assert.equal((messages[2]?.['error'] as { code: number }).code, -32601);
    });

    it('a batch of notifications only is 202 with no body', async () => {
      const reply = await post(
        svc.baseUrl,
        [
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } },
        ],
        v2025(),
      );
      assert.equal(reply.status, 202);
      assert.equal(reply.text, '');
    });

    it('a client too old to send MCP-Protocol-Version may batch as well', async () => {
      const reply = await post(svc.baseUrl, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], auth());
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(JSON.parse(reply.text), [{ jsonrpc: '2.0', id: 1, result: {} }]);
    });
  });

  it('an unsupported MCP-Protocol-Version lists the supported ones (-32022)', async () => {
    const reply = await post(svc.baseUrl, INIT, { ...auth(), 'mcp-protocol-version': '1999-01-01' });
    assert.equal(reply.status, 400);
    const error = rpcError(reply);
    assert.equal(error.code, -32022);
    assert.deepEqual(error.data, {
      supported: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'],
      requested: '1999-01-01',
    });
  });

  for (const method of ['GET', 'DELETE']) {
    it(`${method} is 405`, async () => {
      const reply = await post(svc.baseUrl, '', { ...auth(), accept: 'text/event-stream' }, method);
      assert.equal(reply.status, 405);
      assert.equal(reply.headers.get('allow'), 'POST');
      rpcError(reply);
    });
  }

  describe('keys', () => {
    const challenge = (refused = false): string =>
      `Bearer realm="svc"${refused ? ', error="invalid_token"' : ''}, resource_metadata="${svc.baseUrl}/.well-known/oauth-protected-resource/v1/mcp"`;
    it('a missing key is 401 with WWW-Authenticate naming the OAuth metadata (SPEC §8) and a JSON-RPC error', async () => {
      const reply = await post(svc.baseUrl, INIT);
      assert.equal(reply.status, 401);
      assert.equal(reply.headers.get('www-authenticate'), challenge());
      const error = rpcError(reply);
      assert.match(error.message, /API key/);
      assert.equal(reply.message?.['id'], INIT.id);
      const discovery = await fetch(`${svc.baseUrl}/.well-known/oauth-protected-resource/v1/mcp`);
      assert.equal(discovery.status, 200);
    });

    // A bearer key that was refused is "invalid_token" (RFC 6750 §3.1); no bearer key at all has no code.
    for (const [what, header, refused] of [
      ['a malformed key', 'Bearer svc_sk_not-a-real-key', true],
      ['a well-formed but unknown key', 'Bearer svc_sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', true],
      ['another scheme', 'Basic dXNlcjpwYXNz', false],
    ] as const) {
      it(`${what} is 401 on initialize, tools/list and tools/call`, async () => {
        for (const body of [
          INIT,
          { jsonrpc: '2.0', id: 2, method: 'tools/list' },
          toolCall('web_search', { query: 'x' }),
        ]) {
          const reply = await post(svc.baseUrl, body, { authorization: header as string });
          assert.equal(reply.status, 401, reply.text);
          assert.equal(reply.headers.get('www-authenticate'), challenge(refused));
          rpcError(reply);
        }
      });
    }

    it('a revoked key is 401', async () => {
      const other = await svc.createFundedKey(0);
      // A good tools/list first, so the adapter's cached tool list is warm: the key is still checked.
      const good = await post(
        svc.baseUrl,
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { authorization: `Bearer ${other.key}` },
      );
      assert.equal(good.status, 200);
      await svc.core.keys.revoke(other.keyId);
      const reply = await post(
        svc.baseUrl,
        { jsonrpc: '2.0', id: 2, method: 'tools/list' },
        { authorization: `Bearer ${other.key}` },
      );
      assert.equal(reply.status, 401);
      assert.equal(reply.headers.get('www-authenticate'), challenge(true));
    });
  });

  describe('bad input: the right error, a message naming the problem, and no charge', () => {
    let balanceBefore: bigint;
    beforeEach(async () => {
      balanceBefore = (await svc.wallet(accountId)).balance;
    });
    afterEach(async () => {
      const wallet = await svc.wallet(accountId);
      assert.equal(wallet.balance, balanceBefore, 'a bad request must cost nothing');
      assert.equal(wallet.held, 0n);
    });

    const cases: Array<{
      name: string;
      body: string | object;
      headers?: Record<string, string>;
      status: number;
      code: number;
      match: RegExp;
    }> = [
      { name: 'invalid JSON', body: '{"jsonrpc":"2.0",', status: 400, code: -32700, match: /Parse error/ },
      {
        name: 'a batch array in 2025-06-18',
        body: [INIT, INIT],
        headers: { 'mcp-protocol-version': '2025-06-18' },
        status: 400,
        code: -32600,
        match: /batch/i,
      },
      {
        name: 'an invalid tools/list cursor',
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { cursor: 'page-2' } },
        status: 200,
        code: -32602,
        match: /cursor/,
      },
      {
        name: 'a JSON string, not an object',
        body: '"hello"',
        status: 400,
        code: -32600,
        match: /JSON-RPC 2.0 object/,
      },
      {
        name: 'a wrong jsonrpc version',
        body: { jsonrpc: '1.0', id: 1, method: 'ping' },
        status: 400,
        code: -32600,
        match: /jsonrpc/,
      },
      { name: 'an object with no method', body: { jsonrpc: '2.0', id: 1 }, status: 400, code: -32600, match: /method/ },
      { name: 'a null id', body: { jsonrpc: '2.0', id: null, method: 'ping' }, status: 400, code: -32600, match: /id/ },
      {
        name: 'params that are not an object',
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: [1] },
        status: 400,
        code: -32600,
        match: /params/,
      },
      {
        name: 'an unknown method',
        body: { jsonrpc: '2.0', id: 1, method: 'resources/list' },
        status: 200,
        code: -32601,
        match: /resources\/list/,
      },
      {
        name: 'an unknown tool',
        body: toolCall('image_search', { query: 'x' }),
        status: 200,
        code: -32602,
        match: /image_search/,
      },
      {
        name: 'tools/call without a name',
        body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} },
        status: 200,
        code: -32602,
        match: /name/,
      },
      {
        name: 'arguments that are not an object',
        body: toolCall('web_search', 'query'),
        status: 200,
        code: -32602,
        match: /arguments/,
      },
      { name: 'a missing argument', body: toolCall('web_search', {}), status: 200, code: TOOL_ERROR, match: /"query"/ },
      {
        name: 'an empty query',
        body: toolCall('web_search', { query: '' }),
        status: 200,
        code: TOOL_ERROR,
        match: /"query"/,
      },
      {
        name: 'a 401-character query',
        body: toolCall('web_search', { query: 'x'.repeat(401) }),
        status: 200,
        code: TOOL_ERROR,
        match: /"query"/,
      },
      {
        name: 'a mistyped argument',
        body: toolCall('web_search', { query: 'x', max_results: '5' }),
        status: 200,
        code: TOOL_ERROR,
        match: /"max_results".*integer/,
      },
      {
        name: 'an unknown argument',
        body: toolCall('web_search', { query: 'x', country: 'ir' }),
        status: 200,
        code: TOOL_ERROR,
        match: /"country"/,
      },
      {
        // Raw JSON: in a JS object literal `__proto__` would set the prototype instead of a key.
        name: 'an argument named __proto__',
        body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"x","__proto__":{"max_results":1}}}}',
        status: 200,
        code: TOOL_ERROR,
        match: /Unknown argument "__proto__"/,
      },
      {
        name: 'max_results 0',
        body: toolCall('web_search', { query: 'x', max_results: 0 }),
        status: 200,
        code: TOOL_ERROR,
        match: /"max_results".*between 1 and 20/,
      },
      {
        name: 'max_results 21',
        body: toolCall('web_search', { query: 'x', max_results: 21 }),
        status: 200,
        code: TOOL_ERROR,
        match: /"max_results".*between 1 and 20/,
      },
      {
        name: 'max_results 2.5',
        body: toolCall('web_search', { query: 'x', max_results: 2.5 }),
        status: 200,
        code: TOOL_ERROR,
        match: /"max_results"/,
      },
      {
        name: 'a point in Paris',
        body: toolCall('maps_search_places', { query: 'x', latitude: 48.8566, longitude: 2.3522 }),
        status: 200,
        code: TOOL_ERROR,
        match: /inside Iran/,
      },
      {
        name: 'a point in the Persian Gulf south of Iran',
        body: toolCall('maps_search_places', { query: 'x', latitude: 24.0, longitude: 54.0 }),
        status: 200,
        code: TOOL_ERROR,
        match: /inside Iran/,
      },
      {
        name: 'a latitude without a longitude',
        body: toolCall('maps_search_places', { query: 'x', latitude: 35.7 }),
        status: 200,
        code: TOOL_ERROR,
        match: /together/,
      },
      {
        name: 'a latitude as a string',
        body: toolCall('maps_search_places', { query: 'x', latitude: '35.7', longitude: 51.4 }),
        status: 200,
        code: TOOL_ERROR,
        match: /"latitude".*number/,
      },
      {
        name: 'limit 31',
        body: toolCall('maps_search_places', { query: 'x', limit: 31 }),
        status: 200,
        code: TOOL_ERROR,
        match: /"limit"/,
      },
      {
        name: 'shopping limit 25',
        body: toolCall('shopping_search', { query: 'x', limit: 25 }),
        status: 200,
        code: TOOL_ERROR,
        match: /"limit".*between 1 and 24/,
      },
      {
        name: 'an unknown sort',
        body: toolCall('shopping_search', { query: 'x', sort: 'cheapest' }),
        status: 200,
        code: TOOL_ERROR,
        match: /"sort"/,
      },
      {
        name: 'min above max price',
        body: toolCall('shopping_search', { query: 'x', min_price_toman: 10, max_price_toman: 5 }),
        status: 200,
        code: TOOL_ERROR,
        match: /min_price_toman/,
      },
      {
        name: 'initialize without protocolVersion',
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} },
        status: 200,
        code: -32602,
        match: /protocolVersion/,
      },
      {
        name: 'a wrong Content-Type',
        body: INIT,
        headers: { 'content-type': 'text/plain' },
        status: 415,
        code: -32600,
        match: /Content-Type/,
      },
      {
        name: 'a wrong Accept',
        body: INIT,
        headers: { accept: 'text/html' },
        status: 406,
        code: -32600,
        match: /Accept/,
      },
      {
        name: 'an unsupported MCP-Protocol-Version',
        body: INIT,
        headers: { 'mcp-protocol-version': '2023-01-01' },
        status: 400,
        code: -32022,
        match: /2023-01-01/,
      },
      {
        name: 'a foreign Origin',
        body: INIT,
        headers: { origin: 'https://evil.example' },
        status: 403,
        code: -32003,
        match: /evil\.example/,
      },
    ];
    for (const c of cases) {
      it(`${c.name}: HTTP ${c.status}, ${c.code === TOOL_ERROR ? 'an isError tool result' : `JSON-RPC ${c.code}`}`, async () => {
        const reply = await post(svc.baseUrl, c.body, { ...auth(), ...c.headers });
        assert.equal(reply.status, c.status, reply.text);
        if (c.code === TOOL_ERROR) {
          assertMcpResponse(reply.message, 'CallToolResult');
          const result = reply.message?.['result'] as {
            isError: boolean;
            content: Array<{ text: string }>;
            _meta: Record<string, unknown>;
          };
          assert.equal(result.isError, true, reply.text);
          assert.equal(result._meta['svc/error_code'], 'invalid_argument');
          assert.equal(result._meta['svc/cost'], 0);
          assert.match(result.content[0]?.text ?? '', c.match);
          return;
        }
        const error = rpcError(reply);
        assert.equal(error.code, c.code);
        assert.match(error.message, c.match);
      });
    }

    it('a 2 MB body is 413 with a JSON-RPC error', async () => {
      const big = toolCall('web_search', { query: 'x'.repeat(2 * 1024 * 1024) });
      const reply = await post(svc.baseUrl, big, auth());
      assert.equal(reply.status, 413);
      const error = rpcError(reply);
      assert.match(error.message, /larger than the limit/);
    });

    it('a local browser Origin is allowed', async () => {
      const reply = await post(svc.baseUrl, INIT, { ...auth(), origin: 'http://localhost:6274' });
      assert.equal(reply.status, 200);
    });

    it('the error of a request with a readable id echoes it', async () => {
      const reply = await post(svc.baseUrl, { jsonrpc: '2.0', id: 'abc', method: 'nope' }, auth());
      assert.equal(reply.message?.['id'], 'abc');
    });
  });

  it("leaves exactly one usage record per tool call, keyed by svc's request id, the client's kept beside it", async () => {
    const reply = await post(svc.baseUrl, toolCall('shopping_search', { query: 'گوشی سامسونگ' }), {
      ...auth(),
      'x-request-id': 'req_mcp_usage_check',
    });
    const requestId = reply.headers.get('x-request-id') ?? '';
    assert.match(requestId, /^req_[0-9a-f]{35}$/);
    assert.equal(reply.headers.get('x-client-request-id'), 'req_mcp_usage_check');
    const result = reply.message?.['result'] as { _meta: Record<string, unknown> };
    assert.equal(result._meta['svc/request_id'], requestId);
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .selectAll()
      .where('request_id', '=', requestId)
      .execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.resource, 'shopping_search');
    assert.equal(rows[0]?.cost, 230n);
    assert.equal(rows[0]?.client_request_id, 'req_mcp_usage_check');
  });
});
