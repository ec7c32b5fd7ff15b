import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertMcp, assertMcpResponse } from '../helpers/mcp-schema';
import { post } from './helpers';
import { headerValue, MODERN, ModernClient } from './modern-client';

const ALL_VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

describe('MCP 2026-07-28 (stateless, no handshake) beside the legacy versions', () => {
  let svc: TestSvc;
  let key: string;
  let accountId: string;
  let client: ModernClient;

  before(async () => {
    svc = await startSvc();
    ({ key, accountId } = await svc.createFundedKey(10_000));
    client = new ModernClient(svc.baseUrl, key);
  });
  after(async () => {
    await svc?.close();
  });

  function error(reply: { message: Record<string, unknown> }): { code: number; message: string; data?: unknown } {
    const e = reply.message['error'] as { code: number; message: string; data?: unknown } | undefined;
    assert.ok(e !== undefined, `expected an error, got ${JSON.stringify(reply.message)}`);
    return e;
  }

  it('server/discover: the versions, the tools capability and serverInfo, as the 2026-07-28 schema says', async () => {
    const reply = await client.request('server/discover');
    assert.equal(reply.status, 200);
    assertMcpResponse(reply.message, 'DiscoverResult', MODERN);
    const result = reply.message['result'] as Record<string, unknown>;
    assert.equal(result['resultType'], 'complete');
    assert.deepEqual(result['supportedVersions'], ALL_VERSIONS);
    assert.deepEqual(result['capabilities'], { tools: { listChanged: false } });
    assert.equal(typeof result['ttlMs'], 'number');
    assert.equal(result['cacheScope'], 'public');
    const info = (result['_meta'] as Record<string, Record<string, unknown>>)[SERVER_INFO];
    assert.equal(info?.['name'], 'svc');
    assert.equal(typeof info?.['description'], 'string');
  });

  it('tools/list without initialize: the three tools in a fixed order, with ttlMs and cacheScope', async () => {
    const first = await client.request('tools/list');
    assertMcpResponse(first.message, 'ListToolsResult', MODERN);
    const result = first.message['result'] as { tools: Array<{ name: string }>; ttlMs: number; cacheScope: string };
    assert.deepEqual(
      result.tools.map((t) => t.name),
      ['web_search', 'maps_search_places', 'shopping_search'],
    );
    assert.ok(Number.isInteger(result.ttlMs) && result.ttlMs > 0);
    // Per key (a key may be limited to some tools), so no shared cache may keep it.
    assert.equal(result.cacheScope, 'private');
    const again = await client.call('tools/list');
    assert.deepEqual(again['tools'], result.tools, 'the same list, byte for byte, on every call');
  });

  it("each tool's output schema names its own providers as examples", async () => {
    const { tools } = (await client.call('tools/list')) as {
      tools: Array<{ name: string; outputSchema: { properties: { provider: { description: string } } } }>;
    };
    const said = Object.fromEntries(tools.map((t) => [t.name, t.outputSchema.properties.provider.description]));
    assert.match(said['web_search'] ?? '', /perplexity/);
    assert.doesNotMatch(said['web_search'] ?? '', /neshan|torob/);
    assert.match(said['maps_search_places'] ?? '', /neshan/);
    assert.match(said['shopping_search'] ?? '', /torob/);
  });

  it('a billed tools/call: resultType complete, serverInfo in _meta, charged once', async () => {
    const before = (await svc.wallet(accountId)).balance;
    const reply = await client.request('tools/call', { name: 'shopping_search', arguments: { query: 'گوشی' } });
    assert.equal(reply.status, 200);
    assertMcpResponse(reply.message, 'CallToolResult', MODERN);
    const result = reply.message['result'] as { resultType: string; isError: boolean; _meta: Record<string, unknown> };
    assert.equal(result.resultType, 'complete');
    assert.equal(result.isError, false);
    assert.equal(result._meta['svc/cost'], 230);
    assert.equal((result._meta[SERVER_INFO] as { name: string }).name, 'svc');
    assert.equal((await svc.wallet(accountId)).balance, before - 230n);
  });

  it('answers a response stream when the client prefers it', async () => {
    const reply = await client.request('tools/list', {}, { accept: 'text/event-stream' });
    assert.match(reply.headers.get('content-type') ?? '', /^text\/event-stream/);
    assertMcpResponse(reply.message, 'ListToolsResult', MODERN);
  });

  it('bad arguments are an isError result the model can read, not a protocol error', async () => {
    const reply = await client.request('tools/call', { name: 'web_search', arguments: { query: 'x', max_results: 0 } });
    assertMcpResponse(reply.message, 'CallToolResult', MODERN);
    const result = reply.message['result'] as { isError: boolean; content: Array<{ text: string }> };
    assert.equal(result.isError, true);
    assert.match(result.content[0]?.text ?? '', /max_results/);
  });

  it('an unknown version in _meta and the header: 400, UnsupportedProtocolVersionError listing the supported ones', async () => {
    const reply = await client.request(
      'tools/list',
      {},
      {
        headers: { 'mcp-protocol-version': '1900-01-01' },
        meta: { 'io.modelcontextprotocol/protocolVersion': '1900-01-01' },
      },
    );
    assert.equal(reply.status, 400);
    assertMcp('UnsupportedProtocolVersionError', reply.message, MODERN);
    assert.deepEqual(error(reply).data, { supported: ALL_VERSIONS, requested: '1900-01-01' });
  });

  describe('header checks: 400 and HeaderMismatch (-32020)', () => {
    const cases: Array<[string, string, Record<string, unknown>, Record<string, string>, RegExp]> = [
      ['MCP-Protocol-Version missing', 'tools/list', {}, { 'mcp-protocol-version': '' }, /MCP-Protocol-Version/],
      ['MCP-Protocol-Version unlike _meta', 'tools/list', {}, { 'mcp-protocol-version': '2025-11-25' }, /2025-11-25/],
      [
        'MCP-Protocol-Version an unknown version unlike _meta',
        'tools/list',
        {},
        { 'mcp-protocol-version': 'not-a-version' },
        /not-a-version/,
      ],
      ['Mcp-Method missing', 'tools/list', {}, { 'mcp-method': '' }, /Mcp-Method/],
      ['Mcp-Method unlike the body', 'tools/list', {}, { 'mcp-method': 'tools/call' }, /tools\/call/],
      [
        'Mcp-Name missing',
        'tools/call',
        { name: 'web_search', arguments: { query: 'x' } },
        { 'mcp-name': '' },
        /Mcp-Name/,
      ],
      [
        'Mcp-Name naming another tool',
        'tools/call',
        { name: 'web_search', arguments: { query: 'x' } },
        { 'mcp-name': 'maps_search_places' },
        /maps_search_places/,
      ],
      [
        'Mcp-Name with invalid characters',
        'tools/call',
        { name: 'web_search', arguments: { query: 'x' } },
        { 'mcp-name': '=?base64?%%%?=' },
        /invalid/,
      ],
    ];
    for (const [what, method, params, headers, match] of cases) {
      it(what, async () => {
        const before = await svc.wallet(accountId);
        const reply = await client.request(method, params, { headers });
        assert.equal(reply.status, 400, JSON.stringify(reply.message));
        assertMcp('HeaderMismatchError', reply.message, MODERN);
        assert.equal(error(reply).code, -32020);
        assert.match(error(reply).message, match);
        assert.deepEqual(await svc.wallet(accountId), before, 'nothing held or charged');
      });
    }

    it('_meta naming an unknown version under a 2026-07-28 header is a mismatch first', async () => {
      const reply = await client.request(
        'server/discover',
        {},
        { meta: { 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' } },
      );
      assert.equal(reply.status, 400);
      assertMcp('HeaderMismatchError', reply.message, MODERN);
      assert.equal(error(reply).code, -32020);
      assert.equal(typeof reply.message['id'], 'number', 'the request id is echoed');
    });

    it('a Base64-encoded Mcp-Name is decoded before the comparison', async () => {
      const reply = await client.request(
        'tools/call',
        { name: 'web_search', arguments: { query: 'x' } },
        { headers: { 'mcp-name': `=?base64?${Buffer.from('web_search').toString('base64')}?=` } },
      );
      assert.equal(reply.status, 200, JSON.stringify(reply.message));
      assert.equal(headerValue('ابزار'), `=?base64?${Buffer.from('ابزار').toString('base64')}?=`);
    });
  });

  it('a request without clientCapabilities is 400 with -32602', async () => {
    const reply = await client.request(
      'tools/list',
      {},
      { meta: { 'io.modelcontextprotocol/clientCapabilities': undefined } },
    );
    assert.equal(reply.status, 400);
    assertMcpResponse(reply.message, 'Result', MODERN);
    assert.equal(error(reply).code, -32602);
    assert.match(error(reply).message, /clientCapabilities/);
  });

  for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/list']) {
    it(`${method} is not a 2026-07-28 method: 404 with -32601`, async () => {
      const reply = await client.request(method, method === 'initialize' ? { protocolVersion: MODERN } : {});
      assert.equal(reply.status, 404);
      assertMcpResponse(reply.message, 'Result', MODERN);
      assert.equal(error(reply).code, -32601);
    });
  }

  describe('each legacy version answers in its own schema', () => {
    for (const version of ['2025-06-18', '2025-11-25'] as const) {
      it(`${version}: initialize, tools/list and tools/call`, async () => {
        const headers = { authorization: `Bearer ${key}`, 'mcp-protocol-version': version };
        const init = await post(
          svc.baseUrl,
          {
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 't', version: '1' } },
          },
          headers,
        );
        assertMcpResponse(init.message, 'InitializeResult', version);
        const list = await post(svc.baseUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
        assertMcpResponse(list.message, 'ListToolsResult', version);
        assert.equal((list.message?.['result'] as Record<string, unknown>)['resultType'], undefined);
        const call = await post(
          svc.baseUrl,
          {
            jsonrpc: '2.0',
            id: 3,
            method: 'tools/call',
            params: { name: 'maps_search_places', arguments: { query: 'داروخانه' } },
          },
          headers,
        );
        assertMcpResponse(call.message, 'CallToolResult', version);
      });
    }
  });
});
