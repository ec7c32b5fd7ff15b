import assert from 'node:assert/strict';
import { ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import OpenAI from 'openai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { AuthServiceDefinition } from '../../gen/svc/core/v1/auth';
import { ToolServiceDefinition } from '../../gen/svc/core/v1/tools';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { connectClient } from '../mcp/helpers';

const HOUR = 3_600_000;

/** What a failed gRPC call said: its status and the `svc-error-*` trailers. */
async function grpcFailure(
  call: (options: { metadata: Metadata; onTrailer: (t: Metadata) => void }) => Promise<unknown>,
  metadata: Metadata,
) {
  let trailer: Metadata | undefined;
  try {
    await call({ metadata, onTrailer: (t) => (trailer = t) });
  } catch (error) {
    assert.ok(error instanceof ClientError, String(error));
    return {
      status: error.code,
      code: trailer?.get('svc-error-code'),
      param: trailer?.get('svc-error-param'),
      message: error.details,
    };
  }
  assert.fail('the call succeeded');
}

describe('keys: cost transparency, scopes, expiry and roll', function () {
  let svc: TestSvc;
  let channel: Channel;
  // The core's clock: real time plus an offset a test moves forward. The auth cache trusts an
  // entry for an hour here, so a refusal after a jump shows the expiry is checked from the cache.
  let offset = 0;
  const now = (): number => Date.now() + offset;
  const admin = (): Metadata => new Metadata({ authorization: `Bearer ${svc.adminToken}` });
  const asKey = (key: string): Metadata => new Metadata({ authorization: `Bearer ${key}` });
  const openai = (key: string): OpenAI =>
    new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
  const keys = () => createClient(KeyServiceDefinition, channel);

  async function keyWith(input: { scope?: string; expiresAt?: number }, balance = 100_000): Promise<FundedKey> {
    const funded = await svc.createFundedKey(balance);
    const { key, secret } = await svc.core.keys.create({ accountId: funded.accountId, name: 'scoped', ...input });
    return { accountId: funded.accountId, keyId: key.id, key: secret };
  }

  /** The one charge entry of a request id (its amount is negative: money out). */
  async function charge(accountId: string, requestId: string) {
    const entries = (await svc.ledger(accountId)).filter((e) => e.requestId === requestId && e.kind === 'charge');
    assert.equal(entries.length, 1, `one charge for ${requestId}`);
    return entries[0]!;
  }

  before(async function () {
    svc = await startSvc({ now, authCacheTtlMs: 24 * HOUR });
    channel = createChannel(svc.coreAddress);
  });

  after(async function () {
    channel.close();
    await svc.close();
  });

  afterEach(function () {
    offset = 0;
  });

  describe('cost in every answer', function () {
    it('non-stream chat: usage.cost and x-svc-cost equal the ledger entry, x-svc-balance the wallet after', async function () {
      const a = await svc.createFundedKey(50_000);
      const { data, response } = await openai(a.key)
        .chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'what does this cost?' }] })
        .withResponse();
      const entry = await charge(a.accountId, response.headers.get('x-request-id') ?? '');
      const cost = response.headers.get('x-svc-cost');
      assert.ok(cost !== null && /^\d+$/.test(cost), `x-svc-cost: ${String(cost)}`);
      assert.equal(BigInt(cost), -entry.amount);
      assert.ok(-entry.amount > 0n);
      assert.equal(BigInt((data.usage as unknown as { cost: number }).cost), -entry.amount);
      const wallet = await svc.wallet(a.accountId);
      assert.equal(response.headers.get('x-svc-balance'), String(wallet.balance));
      assert.equal(wallet.balance, entry.balanceAfter);
      assert.equal(wallet.balance, 50_000n + entry.amount);
    });

    it('non-stream Responses: usage.cost and the headers equal the ledger entry and the wallet after', async function () {
      const a = await svc.createFundedKey(50_000);
      const { data, response } = await openai(a.key)
        .responses.create({ model: 'svc-pro', input: 'hello there' })
        .withResponse();
      const entry = await charge(a.accountId, response.headers.get('x-request-id') ?? '');
      assert.equal(response.headers.get('x-svc-cost'), String(-entry.amount));
      assert.equal(BigInt((data.usage as unknown as { cost: number }).cost), -entry.amount);
      assert.equal(response.headers.get('x-svc-balance'), String((await svc.wallet(a.accountId)).balance));
    });

    it('chat stream: the final usage chunk carries the cost of the ledger entry', async function () {
      const a = await svc.createFundedKey(50_000);
      const { data: stream, response } = await openai(a.key)
        .chat.completions.create({
          model: 'svc-pro',
          messages: [{ role: 'user', content: 'stream it' }],
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      let cost: unknown;
      for await (const chunk of stream) if (chunk.usage) cost = (chunk.usage as unknown as { cost: unknown }).cost;
      const entry = await charge(a.accountId, response.headers.get('x-request-id') ?? '');
      assert.equal(typeof cost, 'number');
      assert.equal(BigInt(cost as number), -entry.amount);
    });

    it('Responses stream: response.completed carries the cost of the ledger entry', async function () {
      const a = await svc.createFundedKey(50_000);
      const { data: stream, response } = await openai(a.key)
        .responses.create({ model: 'svc-pro', input: 'stream it', stream: true })
        .withResponse();
      let cost: unknown;
      for await (const event of stream) {
        if (event.type === 'response.completed') cost = (event.response.usage as unknown as { cost: unknown }).cost;
      }
      const entry = await charge(a.accountId, response.headers.get('x-request-id') ?? '');
      assert.equal(BigInt(cost as number), -entry.amount);
    });

    it('MCP: the tool result _meta carries the cost of the ledger entry and the balance after', async function () {
      const a = await svc.createFundedKey(50_000);
      const client = await connectClient(svc.baseUrl, a.key);
      try {
        const result = (await client.callTool({
          name: 'shopping_search',
          arguments: { query: 'laptop' },
        })) as CallToolResult;
        assert.notEqual(result.isError, true);
        const meta = result._meta as Record<string, unknown>;
        const charges = (await svc.ledger(a.accountId)).filter((e) => e.kind === 'charge');
        assert.equal(charges.length, 1);
        assert.equal(BigInt(meta['svc/cost'] as number), -charges[0]!.amount);
        assert.equal(BigInt(meta['svc/balance_after'] as number), (await svc.wallet(a.accountId)).balance);
      } finally {
        await client.close();
      }
    });
  });

  describe('scopes', function () {
    it('a chat-only key works on the chat API and is refused by the MCP server (HTTP 403, JSON-RPC error), uncharged', async function () {
      const k = await keyWith({ scope: 'chat' });
      const completion = await openai(k.key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
      });
      assert.ok(completion.choices.length > 0);
      const before = await svc.wallet(k.accountId);

      await assert.rejects(connectClient(svc.baseUrl, k.key), /403|scope/);
      const response = await fetch(`${svc.baseUrl}/v1/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${k.key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name: 'shopping_search', arguments: { query: 'tv' } },
        }),
      });
      assert.equal(response.status, 403);
      const body = (await response.json()) as {
        jsonrpc: string;
        id: unknown;
        error: { code: number; message: string };
      };
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.id, 7);
      assert.equal(body.error.code, -32003);
      assert.match(body.error.message, /scope 'chat'/);
      assert.deepEqual(await svc.wallet(k.accountId), before);
    });

    it('a tools-only key works on MCP and is refused by the chat API, Responses and models with 403 permission_denied, uncharged', async function () {
      const k = await keyWith({ scope: 'tools' });
      const client = await connectClient(svc.baseUrl, k.key);
      try {
        const result = (await client.callTool({
          name: 'maps_search_places',
          arguments: { query: 'cafe' },
        })) as CallToolResult;
        assert.notEqual(result.isError, true);
      } finally {
        await client.close();
      }
      const before = await svc.wallet(k.accountId);
      const calls: (() => Promise<unknown>)[] = [
        () => openai(k.key).chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] }),
        () => openai(k.key).responses.create({ model: 'svc-pro', input: 'hi' }),
        () => openai(k.key).models.list(),
      ];
      for (const call of calls) {
        await assert.rejects(call(), (error: unknown) => {
          assert.ok(error instanceof OpenAI.PermissionDeniedError, String(error));
          assert.equal(error.status, 403);
          assert.equal(error.code, 'permission_denied');
          assert.equal(error.type, 'invalid_request_error');
          assert.match(error.message, /scope 'tools'/);
          return true;
        });
      }
      assert.deepEqual(await svc.wallet(k.accountId), before);
      assert.equal((await svc.ledger(k.accountId)).filter((e) => e.kind === 'charge').length, 1);
    });

    it('gRPC: outside its scope a key gets PERMISSION_DENIED with code key_scope_denied; an all key passes both', async function () {
      const chat = await keyWith({ scope: 'chat' });
      const tools = createClient(ToolServiceDefinition, channel);
      const failure = await grpcFailure((o) => tools.listTools({}, o), asKey(chat.key));
      assert.equal(failure.status, Status.PERMISSION_DENIED);
      assert.equal(failure.code, 'key_scope_denied');
      const auth = createClient(AuthServiceDefinition, channel);
      assert.equal(
        (await grpcFailure((o) => auth.authenticate({ scope: 'tools' }, o), asKey(chat.key))).status,
        Status.PERMISSION_DENIED,
      );
      const { principal } = await auth.authenticate({ scope: 'chat' }, { metadata: asKey(chat.key) });
      assert.equal(principal?.scope, 'chat');
      assert.equal(principal?.lineageId, chat.keyId);

      const all = await svc.createFundedKey(10);
      for (const scope of ['chat', 'tools']) {
        assert.equal((await auth.authenticate({ scope }, { metadata: asKey(all.key) })).principal?.scope, 'all');
      }
      assert.ok((await tools.listTools({}, { metadata: asKey(all.key) })).tools.length > 0);
    });
  });

  describe('expiry', function () {
    it('a key works until its expiry and is then refused like a revoked key, even from the auth cache', async function () {
      const k = await keyWith({ expiresAt: now() + HOUR });
      const client = openai(k.key);
      await client.models.list();
      offset = HOUR - 1000;
      await client.models.list();
      offset = HOUR + 1;
      const refusal = async (key: string): Promise<unknown> =>
        client.models.list().then(
          () => assert.fail(`${key} still works`),
          (error: unknown) => error,
        );
      const expired = await refusal('expired key');
      assert.ok(expired instanceof OpenAI.AuthenticationError, String(expired));
      assert.equal(expired.status, 401);
      assert.equal(expired.code, 'invalid_api_key');

      const revoked = await keyWith({});
      await openai(revoked.key).models.list();
      await svc.core.keys.revoke(revoked.keyId);
      const revokedError = await openai(revoked.key)
        .models.list()
        .then(
          () => assert.fail('revoked key still works'),
          (error: unknown) => error as InstanceType<typeof OpenAI.AuthenticationError>,
        );
      assert.equal(revokedError.status, expired.status);
      assert.equal(revokedError.code, expired.code);
      assert.equal(revokedError.message, expired.message);

      const mcp = await fetch(`${svc.baseUrl}/v1/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${k.key}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      assert.equal(mcp.status, 401);
      assert.match(mcp.headers.get('www-authenticate') ?? '', /Bearer realm="svc"/);
    });

    it('the key list shows scope and expiry (gRPC)', async function () {
      const expiresAt = now() + 2 * HOUR;
      const k = await keyWith({ scope: 'tools', expiresAt });
      const { keys: listed } = await keys().listKeys({ accountId: k.accountId }, { metadata: admin() });
      const key = listed.find((x) => x.id === k.keyId);
      assert.equal(key?.scope, 'tools');
      assert.equal(key?.expiresAt?.getTime(), expiresAt);
      assert.equal(key?.lineageId, k.keyId);
      const plain = listed.find((x) => x.id !== k.keyId);
      assert.equal(plain?.scope, 'all');
      assert.equal(plain?.expiresAt, undefined);
    });
  });

  describe('roll', function () {
    it('the new key works at once with the same label, scope and lineage; the old one works within the grace, then is refused', async function () {
      // Rolling over the API takes the `manage` scope, which the new key keeps.
      const k = await keyWith({ scope: 'chat,manage' });
      await openai(k.key).models.list();
      const rolled = await keys().rollKey(
        { keyId: k.keyId, grace: { seconds: 3600n, nanos: 0 } },
        { metadata: asKey(k.key) },
      );
      const fresh = rolled.key!;
      assert.notEqual(fresh.id, k.keyId);
      assert.match(rolled.secret, /^svc_sk_/);
      assert.equal(fresh.name, 'scoped');
      assert.equal(fresh.scope, 'chat');
      assert.equal(fresh.manage, true);
      assert.equal(fresh.lineageId, k.keyId);
      assert.equal(rolled.previous?.lineageId, k.keyId);
      assert.equal(rolled.previous?.replacedBy, fresh.id);
      assert.equal(fresh.expiresAt, undefined);

      await openai(rolled.secret).models.list();
      await openai(k.key).models.list();
      offset = HOUR - 1000;
      await openai(k.key).models.list();
      offset = HOUR + 1000;
      await assert.rejects(
        openai(k.key).models.list(),
        (e: unknown) => e instanceof OpenAI.AuthenticationError && e.code === 'invalid_api_key',
      );
      await openai(rolled.secret).models.list();
      // The new key keeps the scope.
      await assert.rejects(connectClient(svc.baseUrl, rolled.secret), /403|scope/);
    });

    it('grace 0 stops the old key at once; an already rolled key cannot be rolled again', async function () {
      const k = await keyWith({});
      await openai(k.key).models.list();
      const rolled = await svc.core.keys.roll(k.keyId, { graceMs: 0 });
      await assert.rejects(openai(k.key).models.list(), OpenAI.AuthenticationError);
      await openai(rolled.secret).models.list();
      const again = await grpcFailure((o) => keys().rollKey({ keyId: k.keyId }, o), admin());
      assert.equal(again.status, Status.INVALID_ARGUMENT);
      assert.equal(again.param, 'key_id');
      assert.match(again.message, /already rolled/);
    });

    it('the default grace is 24 hours; a rolled key with an expiry keeps it', async function () {
      const expiresAt = now() + 72 * HOUR;
      const k = await keyWith({ expiresAt });
      const rolled = await keys().rollKey({ keyId: k.keyId }, { metadata: admin() });
      assert.equal(rolled.key?.expiresAt?.getTime(), expiresAt);
      const graceEnd = rolled.previous?.expiresAt?.getTime() ?? 0;
      assert.ok(
        Math.abs(graceEnd - (now() + 24 * HOUR)) < 60_000,
        `old key expires at ${new Date(graceEnd).toISOString()}`,
      );
    });

    it('two concurrent rolls of one key: exactly one succeeds, the lineage has one successor', async function () {
      const k = await keyWith({});
      const results = await Promise.allSettled([
        svc.core.keys.roll(k.keyId),
        svc.core.keys.roll(k.keyId),
        svc.core.keys.roll(k.keyId),
      ]);
      const ok = results.filter((r) => r.status === 'fulfilled');
      assert.equal(ok.length, 1, JSON.stringify(results.map((r) => r.status)));
      const listed = await svc.core.keys.list(k.accountId);
      const successors = listed.filter((x) => x.lineageId === k.keyId && x.id !== k.keyId);
      assert.equal(successors.length, 1);
      assert.equal(listed.find((x) => x.id === k.keyId)?.replacedBy, successors[0]?.id);
    });

    it("another account's key cannot be rolled with an API key: it looks like no key", async function () {
      const mine = await keyWith({ scope: 'manage' });
      const theirs = await keyWith({});
      const failure = await grpcFailure((o) => keys().rollKey({ keyId: theirs.keyId }, o), asKey(mine.key));
      assert.equal(failure.status, Status.NOT_FOUND);
      await openai(theirs.key).models.list();
    });
  });

  describe('bad input (gRPC): INVALID_ARGUMENT naming the field, nothing created', function () {
    it('an unknown scope, an expiry in the past, a grace over 30 days or negative', async function () {
      const a = await svc.createFundedKey(0);
      const count = async (): Promise<number> => (await svc.core.keys.list(a.accountId)).length;
      const start = await count();
      const cases: [() => (o: { metadata: Metadata; onTrailer: (t: Metadata) => void }) => Promise<unknown>, string][] =
        [
          [() => (o) => keys().createKey({ accountId: a.accountId, name: 'x', scope: 'admin' }, o), 'scope'],
          [() => (o) => keys().createKey({ accountId: a.accountId, name: 'x', scope: 'CHAT' }, o), 'scope'],
          [
            () => (o) =>
              keys().createKey(
                { accountId: a.accountId, name: 'x', scope: 'chat', expiresAt: new Date(now() - 1000) },
                o,
              ),
            'expires_at',
          ],
          [
            () => (o) => keys().rollKey({ keyId: a.keyId, grace: { seconds: 30n * 86400n + 1n, nanos: 0 } }, o),
            'grace',
          ],
          [() => (o) => keys().rollKey({ keyId: a.keyId, grace: { seconds: -1n, nanos: 0 } }, o), 'grace'],
          [() => (o) => keys().rollKey({ keyId: '' }, o), 'key_id'],
        ];
      for (const [make, param] of cases) {
        const failure = await grpcFailure(make(), admin());
        assert.equal(failure.status, Status.INVALID_ARGUMENT, `${param}: ${failure.message}`);
        assert.equal(failure.code, 'invalid_argument');
        assert.equal(failure.param, param);
      }
      assert.equal(await count(), start);
      // The key that was not rolled still works and was not touched.
      const [key] = (await svc.core.keys.list(a.accountId)).filter((k) => k.id === a.keyId);
      assert.equal(key?.replacedBy, null);
      assert.equal(key?.expiresAt, null);
    });
  });
});
