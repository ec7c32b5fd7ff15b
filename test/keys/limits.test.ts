import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import OpenAI from 'openai';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadConfig } from '../../core';
import type { SvcConfig } from '../../core/config/types';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { startSvc, type TestSvc } from '../helpers/harness';
import { connectClient } from '../mcp/helpers';

// The built-in sandbox's maps_search_places: always finds places, always costs this.
const PRICE = 460n;

/** The sandbox config with an alias for svc-pro, so that a key limited by alias is checked on the id. */
function configWithAlias(): SvcConfig {
  const base = loadConfig(undefined, {});
  const models = new Map(base.models);
  const pro = models.get('svc-pro');
  assert.ok(pro !== undefined);
  models.set('svc-pro', { ...pro, aliases: ['pro-latest'] });
  return { ...base, models };
}

// Issue 22: a key's total spend cap, and the models and tools it may use, over the real clients of
// every wire, on two cores sharing one database (SQLite, or MySQL with SVC_TEST_DATABASE=mysql).
describe('keys: total spend cap, allowed models and tools', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let second: TestSvc;
  let channel: Channel;
  const clients: Client[] = [];
  const admin = (): Metadata => new Metadata({ authorization: `Bearer ${svc.adminToken}` });
  const keys = () => createClient(KeyServiceDefinition, channel);

  before(async function () {
    svc = await startSvc({ config: configWithAlias() });
    second = await startSvc({ config: configWithAlias(), databaseUrl: svc.databaseUrl });
    channel = createChannel(svc.coreAddress);
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    channel?.close();
    await second?.close();
    await svc?.close();
  });

  async function mcp(base: TestSvc, key: string): Promise<Client> {
    const client = await connectClient(base.baseUrl, key);
    clients.push(client);
    return client;
  }

  /** What the account has held and been charged: the holds placed and the ledger's charges. */
  async function money(accountId: string) {
    const holds = await svc.store.db
      .selectFrom('holds')
      .select(sql<bigint>`count(*)`.as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    const charges = (await svc.ledger(accountId, 1000)).filter((e) => e.kind === 'charge');
    return { holds: Number(holds.n), charges: charges.length, wallet: await svc.wallet(accountId) };
  }

  async function keyWith(input: {
    capTotal?: bigint;
    allowedModels?: string[];
    allowedTools?: string[];
  }): Promise<{ accountId: string; keyId: string; key: string }> {
    const funded = await svc.createFundedKey(1_000_000);
    const { key, secret } = await svc.core.keys.create({ accountId: funded.accountId, name: 'limited', ...input });
    return { accountId: funded.accountId, keyId: key.id, key: secret };
  }

  it('a total cap reached across calls on two cores refuses the next, with nothing charged, until raised', async () => {
    const k = await keyWith({ capTotal: PRICE * 3n });
    const cores = [svc, second];
    const callers = await Promise.all(cores.map((c) => mcp(c, k.key)));
    const results = (await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        callers[i % 2]!.callTool({ name: 'maps_search_places', arguments: { query: 'cafe' } }),
      ),
    )) as CallToolResult[];
    assert.equal(results.filter((r) => r.isError !== true).length, 3);
    for (const refused of results.filter((r) => r.isError === true)) {
      const text = String((refused.content[0] as { text: string }).text);
      assert.match(text, /total spend cap of 1380 credits is reached/);
      assert.match(text, /never resets/);
    }
    const after = await money(k.accountId);
    assert.equal(after.charges, 3);
    assert.equal(after.wallet.held, 0n);
    assert.equal(after.wallet.balance, 1_000_000n - PRICE * 3n);

    // The chat API answers the same refusal in OpenAI's format, and charges nothing.
    const openai = new OpenAI({ baseURL: `${second.baseUrl}/v1/openai`, apiKey: k.key, maxRetries: 0 });
    await assert.rejects(
      openai.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.APIError);
        assert.equal(error.status, 429);
        assert.equal(error.code, 'key_cap_exceeded');
        assert.match(error.message, /total spend cap/);
        return true;
      },
    );
    assert.deepEqual((await money(k.accountId)).wallet, after.wallet);
    assert.equal((await money(k.accountId)).charges, 3);

    const listed = await keys().listKeys({ accountId: k.accountId }, { metadata: admin() });
    const shown = listed.keys.find((x) => x.id === k.keyId);
    assert.deepEqual([shown?.capTotal, shown?.spentTotal], [PRICE * 3n, PRICE * 3n]);

    // A negative cap is refused and changes nothing; raising the cap lets the next call through.
    await assert.rejects(
      keys().updateKeyCaps({ keyId: k.keyId, capTotal: -1n }, { metadata: admin() }),
      (e: unknown) => e instanceof ClientError && e.code === Status.INVALID_ARGUMENT && /cap_total/.test(e.details),
    );
    await keys().updateKeyCaps({ keyId: k.keyId, capTotal: PRICE * 4n }, { metadata: admin() });
    const more = (await callers[1]!.callTool({
      name: 'maps_search_places',
      arguments: { query: 'cafe' },
    })) as CallToolResult;
    assert.notEqual(more.isError, true, JSON.stringify(more));
    const m4 = await money(k.accountId);
    assert.equal(
      m4.charges,
      4,
      JSON.stringify(m4, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    );
  });

  it('a model the key may not use is refused before any hold on every wire', async () => {
    const k = await keyWith({ allowedModels: ['svc-embed'] });
    const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: k.key, maxRetries: 0 });
    const denied = (error: unknown): boolean => {
      assert.ok(error instanceof OpenAI.APIError, String(error));
      assert.equal(error.status, 403);
      assert.equal(error.code, 'permission_denied');
      assert.match(error.message, /may not use the model 'svc-pro'; it may use: svc-embed/);
      return true;
    };
    const messages = [{ role: 'user' as const, content: 'hi' }];
    await assert.rejects(openai.chat.completions.create({ model: 'svc-pro', messages }), denied);
    await assert.rejects(openai.chat.completions.create({ model: 'svc-pro', messages, stream: true }), denied);
    await assert.rejects(
      openai.chat.completions.create({ model: 'pro-latest', messages }),
      (error: unknown) =>
        error instanceof OpenAI.APIError && error.status === 403 && /'pro-latest' \(svc-pro\)/.test(error.message),
    );
    await assert.rejects(openai.responses.create({ model: 'svc-pro', input: 'hi' }), denied);
    await assert.rejects(openai.models.retrieve('svc-pro'), denied);

    const anthropic = await fetch(`${svc.baseUrl}/v1/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': k.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', max_tokens: 20, messages }),
    });
    assert.equal(anthropic.status, 403);
    const anthropicBody = (await anthropic.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(anthropicBody.type, 'error');
    assert.equal(anthropicBody.error.type, 'permission_error');
    assert.match(anthropicBody.error.message, /may not use the model 'svc-pro'/);

    const gemini = await fetch(`${svc.baseUrl}/v1/gemini/v1beta/models/svc-pro:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': k.key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    assert.equal(gemini.status, 403);
    const geminiBody = (await gemini.json()) as { error: { code: number; status: string; message: string } };
    assert.deepEqual([geminiBody.error.code, geminiBody.error.status], [403, 'PERMISSION_DENIED']);
    assert.match(geminiBody.error.message, /may not use the model 'svc-pro'/);

    // The allowed model works, and GET /models lists only it.
    const embedded = await openai.embeddings.create({ model: 'svc-embed', input: 'hello' });
    assert.equal(embedded.data.length, 1);
    const listed = await openai.models.list();
    assert.deepEqual(
      listed.data.map((m) => m.id),
      ['svc-embed'],
    );
    const after = await money(k.accountId);
    assert.equal(after.holds, 1, 'only the embedding placed a hold');
    assert.equal(after.charges, 1);
    assert.equal(after.wallet.held, 0n);
  });

  it('a key limited by an alias may use the model it names; other models are refused and not listed', async () => {
    const k = await keyWith({ allowedModels: ['pro-latest'] });
    const view = await svc.core.keys.get(k.keyId);
    assert.deepEqual(view.allowedModels, ['svc-pro']);
    const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: k.key, maxRetries: 0 });
    const answer = await openai.chat.completions.create({
      model: 'pro-latest',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(answer.model, 'svc-pro');
    assert.deepEqual((await openai.models.list()).data.map((m) => m.id).sort(), ['pro-latest', 'svc-pro']);
    await assert.rejects(
      openai.embeddings.create({ model: 'svc-embed', input: 'x' }),
      (error: unknown) =>
        error instanceof OpenAI.APIError && error.status === 403 && error.code === 'permission_denied',
    );
    assert.equal((await money(k.accountId)).holds, 1);
  });

  it('a tool the key may not use is refused before any hold (MCP, Responses, Gemini); tools/list shows the allowed', async () => {
    const k = await keyWith({ allowedTools: ['maps_search_places'] });
    const client = await mcp(svc, k.key);
    const listed = await client.listTools();
    assert.deepEqual(
      listed.tools.map((t) => t.name),
      ['maps_search_places'],
    );
    await assert.rejects(client.callTool({ name: 'web_search', arguments: { query: 'x' } }), (error: unknown) => {
      assert.ok(error instanceof Error);
      // Refused like a call outside the key's scope: HTTP 403 with the JSON-RPC error -32003.
      assert.equal((error as { code?: number }).code, 403);
      assert.match(error.message, /-32003/);
      assert.match(error.message, /may not use the tool 'web_search'; it may use: maps_search_places/);
      return true;
    });
    const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: k.key, maxRetries: 0 });
    await assert.rejects(
      openai.responses.create({ model: 'svc-pro', input: 'news?', tools: [{ type: 'web_search' }] }),
      (error: unknown) =>
        error instanceof OpenAI.APIError &&
        error.status === 403 &&
        error.code === 'permission_denied' &&
        /tool 'web_search'/.test(error.message),
    );
    const gemini = await fetch(`${svc.baseUrl}/v1/gemini/v1beta/models/svc-pro:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': k.key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'news?' }] }], tools: [{ googleSearch: {} }] }),
    });
    assert.equal(gemini.status, 403);
    assert.match(((await gemini.json()) as { error: { message: string } }).error.message, /tool 'web_search'/);
    assert.deepEqual(await money(k.accountId), { holds: 0, charges: 0, wallet: await svc.wallet(k.accountId) });
    assert.equal((await svc.wallet(k.accountId)).held, 0n);

    const allowed = (await client.callTool({
      name: 'maps_search_places',
      arguments: { query: 'cafe' },
    })) as CallToolResult;
    assert.notEqual(allowed.isError, true);
  });

  it('UpdateKeyLimits changes the lists, refuses unknown names changing nothing, and a key may not widen its own', async () => {
    const k = await keyWith({ allowedModels: ['svc-pro'] });
    const md = { metadata: admin() };
    await assert.rejects(
      keys().updateKeyLimits({ keyId: k.keyId, allowedModels: { names: ['svc-pro', 'gpt-nope'] } }, md),
      (e: unknown) =>
        e instanceof ClientError && e.code === Status.INVALID_ARGUMENT && /unknown model "gpt-nope"/.test(e.details),
    );
    await assert.rejects(
      keys().updateKeyLimits({ keyId: k.keyId, allowedTools: { names: ['nope'] } }, md),
      (e: unknown) => e instanceof ClientError && /unknown tool "nope"/.test(e.details),
    );
    assert.deepEqual((await svc.core.keys.get(k.keyId)).allowedModels, ['svc-pro']);
    const changed = await keys().updateKeyLimits(
      { keyId: k.keyId, allowedModels: { names: [] }, allowedTools: { names: ['web_search'] } },
      md,
    );
    assert.deepEqual([changed.key?.allowedModels, changed.key?.allowedTools], [[], ['web_search']]);

    // A manage key narrows its own tools but cannot widen them back.
    const manager = await svc.core.keys.create({
      accountId: k.accountId,
      scope: 'all,manage',
      allowedTools: ['web_search', 'maps_search_places'],
    });
    const self = { metadata: new Metadata({ authorization: `Bearer ${manager.secret}` }) };
    await keys().updateKeyLimits({ keyId: manager.key.id, allowedTools: { names: ['web_search'] } }, self);
    await assert.rejects(
      keys().updateKeyLimits({ keyId: manager.key.id, allowedTools: { names: [] } }, self),
      (e: unknown) => e instanceof ClientError && e.code === Status.PERMISSION_DENIED,
    );
    assert.deepEqual((await svc.core.keys.get(manager.key.id)).allowedTools, ['web_search']);
  });
});
