import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { configA } from '../mcp/helpers';
import { testConfig } from '../openai/fixture';

/** A server no request may ever reach: it stands for any host the operator did not configure. */
async function startTrap(): Promise<{ url: string; hits: string[]; close(): Promise<void> }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method ?? ''} ${req.url ?? ''}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('security: upstream hosts, MCP origins, and the key never stored', function () {
  this.timeout(120_000);
  let upstream: FakeUpstream;
  let tools: FakeToolProviders;
  let trap: Awaited<ReturnType<typeof startTrap>>;
  let svc: TestSvc;
  let funded: FundedKey;

  before(async () => {
    upstream = await startFakeUpstream();
    tools = await startFakeToolProviders();
    trap = await startTrap();
    svc = await startSvc({ config: testConfig(upstream.baseUrl, configA(tools)) });
    funded = await svc.createFundedKey(10_000_000n, 'security');
  });
  after(async () => {
    await svc?.close();
    await upstream?.close();
    await tools?.close();
    await trap?.close();
  });

  const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${funded.key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  const mcp = (body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${svc.baseUrl}/v1/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${funded.key}`,
        'content-type': 'application/json',
        accept: 'application/json',
        ...headers,
      },
      body: JSON.stringify(body),
    });

  it('no request can steer an upstream call to another host: base_url-like fields in bodies, headers and tool arguments are refused or ignored', async () => {
    upstream.reset();
    const before = tools.requests.length;
    const steer = {
      base_url: trap.url,
      baseURL: trap.url,
      api_base: trap.url,
      endpoint: trap.url,
      url: trap.url,
      host: '127.0.0.1',
      upstream_url: trap.url,
    };
    const headers = {
      'x-base-url': trap.url,
      'x-upstream': trap.url,
      'openai-base-url': trap.url,
      forwarded: `host=${new URL(trap.url).host}`,
      'x-forwarded-host': new URL(trap.url).host,
    };
    const answers: number[] = [];
    for (const body of [
      // A plain call under steering headers: served by the configured upstream.
      { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] },
      // Unknown steering fields in the body: refused with a 400 (nothing dropped, SPEC §7d).
      { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }], ...steer },
      { model: trap.url, messages: [{ role: 'user', content: 'hi' }] },
      { model: `${trap.url}/v1#svc-pro`, messages: [{ role: 'user', content: 'hi' }] },
      { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }], extra_body: steer, metadata: steer },
    ]) {
      const res = await chat(body, headers);
      answers.push(res.status);
      await res.text();
    }
    const responses = await fetch(`${svc.baseUrl}/v1/openai/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${funded.key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'svc-pro', input: 'hi', ...steer }),
    });
    answers.push(responses.status);
    await responses.text();
    for (const [name, args] of [
      ['web_search', { query: 'tehran', ...steer }],
      ['web_search', { query: trap.url }],
      ['maps_search_places', { query: 'cafe', base_url: trap.url }],
      ['shopping_search', { query: 'laptop', url: trap.url }],
      ['shopping_search', { query: `laptop@${new URL(trap.url).host}` }],
    ] as const) {
      const res = await mcp(
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args, _meta: steer } },
        headers,
      );
      answers.push(res.status);
      await res.text();
    }
    assert.deepEqual(trap.hits, [], 'the trap host was never called');
    assert.ok(
      answers.every((s) => s < 500),
      `answers: ${answers.join(',')}`,
    );
    // Upstream calls that did happen went to the configured hosts, with the configured model.
    const configuredLlm = new URL(upstream.baseUrl).host;
    for (const r of upstream.requests) {
      assert.equal(r.headers.host, configuredLlm);
      assert.equal(r.body['model'], 'fake-model-1');
    }
    assert.ok(upstream.requests.length >= 1, 'the plain svc-pro calls reached the configured upstream');
    // Tool calls reached only the configured fake providers (which record them).
    assert.ok(tools.requests.length > before, 'the tool calls reached the configured providers');
  });

  it('MCP: a browser Origin that is not allowed is a 403 with a JSON-RPC error; local and absent origins pass', async () => {
    const call = { jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} };
    for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'null', 'http://127.0.0.1.nip.io']) {
      const res = await mcp(call, { origin });
      assert.equal(res.status, 403, origin);
      const body = (await res.json()) as { jsonrpc: string; error: { code: number } };
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.error.code, -32003);
    }
    for (const origin of ['http://localhost:3000', 'http://127.0.0.1:8080']) {
      assert.equal((await mcp(call, { origin })).status, 200, origin);
    }
    assert.equal((await mcp(call)).status, 200);
  });

  it('after chat, Responses and tool calls, the full key is in no column of any table, and its hash is', async () => {
    // Traffic that writes keys' last use, usage, ledger, stored responses and idempotency records.
    await (
      await chat({ model: 'svc-pro', messages: [{ role: 'user', content: 'hello' }] }, { 'idempotency-key': 'idem-1' })
    ).text();
    await (
      await fetch(`${svc.baseUrl}/v1/openai/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${funded.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-pro', input: 'hello', store: true }),
      })
    ).text();
    await (
      await mcp({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'shopping_search', arguments: { query: 'laptop' } },
      })
    ).text();
    await (
      await chat(
        { model: 'svc-pro', messages: [{ role: 'user', content: 'x' }] },
        { authorization: `Bearer ${funded.key}x` },
      )
    ).text();

    const secret = funded.key.slice('svc_sk_'.length);
    const tables =
      svc.store.dialect === 'mysql'
        ? (
            await sql<{
              name: string;
            }>`select table_name as name from information_schema.tables where table_schema = database()`.execute(
              svc.store.db,
            )
          ).rows.map((r) => r.name)
        : (
            await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(svc.store.db)
          ).rows.map((r) => r.name);
    assert.ok(tables.includes('api_keys') && tables.includes('ledger_entries'));
    const found: string[] = [];
    let sawHash = false;
    const hash = (await import('node:crypto')).createHash('sha256').update(funded.key).digest('hex');
    for (const table of tables) {
      const rows = (await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(svc.store.db)).rows;
      for (const row of rows) {
        const text = JSON.stringify(row, (_k, v: unknown) =>
          typeof v === 'bigint' ? v.toString() : Buffer.isBuffer(v) ? v.toString('latin1') : v,
        );
        if (text.includes(hash)) sawHash = true;
        if (text.includes(secret)) found.push(table);
      }
    }
    assert.deepEqual(found, [], `the key's secret part is stored in: ${found.join(', ')}`);
    assert.ok(sawHash, 'the SHA-256 hash of the key is what is stored');
  });
});
