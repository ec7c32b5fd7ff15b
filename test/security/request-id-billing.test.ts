import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';

// Issue 13.1: a request id the client chooses must never be the identity of a charge. Every call
// below carries the same x-request-id; each one reaches an upstream (the sandbox providers), so
// each one must be charged, recorded and answered under an id of svc's own.

const CLIENT_ID = 'same-1';

interface Reported {
  readonly cost: bigint;
  readonly requestId: string;
}

function openai(svc: TestSvc, key: string): OpenAI {
  return new OpenAI({
    apiKey: key,
    baseURL: `${svc.baseUrl}/v1/openai`,
    maxRetries: 0,
    defaultHeaders: { 'x-request-id': CLIENT_ID },
  });
}

async function chat(client: OpenAI, n: number): Promise<Reported> {
  const { data, response } = await client.chat.completions
    .create({ model: 'svc-pro', messages: [{ role: 'user', content: `hello ${n}` }] })
    .withResponse();
  const cost = (data.usage as unknown as { cost: number }).cost;
  assert.equal(response.headers.get('x-svc-cost'), String(cost));
  return { cost: BigInt(cost), requestId: response.headers.get('x-request-id') ?? '' };
}

async function streamed(client: OpenAI, n: number): Promise<Reported> {
  const { data: stream, response } = await client.chat.completions
    .create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: `stream ${n}` }],
      stream: true,
      stream_options: { include_usage: true },
    })
    .withResponse();
  let cost: number | undefined;
  for await (const chunk of stream) if (chunk.usage) cost = (chunk.usage as unknown as { cost: number }).cost;
  assert.ok(cost !== undefined && cost > 0);
  return { cost: BigInt(cost), requestId: response.headers.get('x-request-id') ?? '' };
}

async function responses(client: OpenAI, n: number): Promise<Reported> {
  const { data, response } = await client.responses
    .create({ model: 'svc-pro', input: `responses ${n}`, store: false })
    .withResponse();
  const cost = (data.usage as unknown as { cost: number }).cost;
  return { cost: BigInt(cost), requestId: response.headers.get('x-request-id') ?? '' };
}

async function tool(svc: TestSvc, key: string, n: number): Promise<Reported> {
  const response = await fetch(`${svc.baseUrl}/v1/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-request-id': CLIENT_ID,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: n,
      method: 'tools/call',
      params: { name: 'maps_search_places', arguments: { query: 'cafe' } },
    }),
  });
  assert.equal(response.status, 200);
  const body = (await response.json()) as { result: { isError?: boolean; _meta: Record<string, unknown> } };
  assert.notEqual(body.result.isError, true);
  const requestId = response.headers.get('x-request-id') ?? '';
  assert.equal(body.result._meta['svc/request_id'], requestId);
  return { cost: BigInt(body.result._meta['svc/cost'] as number), requestId };
}

describe('Billing identity: a client-chosen x-request-id never makes a call free', function () {
  this.timeout(120_000);
  let svc: TestSvc;

  before(async () => {
    svc = await startSvc();
  });
  after(async () => {
    await svc.close();
  });

  async function usageCount(accountId: string): Promise<number> {
    const row = await svc.store.db
      .selectFrom('usage_records')
      .select((eb) => eb.fn.countAll<number | bigint | string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async function runAll(keys: readonly string[]): Promise<Reported[]> {
    const out: Reported[] = [];
    for (let n = 0; n < 20; n++) {
      const key = keys[n % keys.length] as string;
      const client = openai(svc, key);
      out.push(await chat(client, n), await streamed(client, n), await responses(client, n), await tool(svc, key, n));
    }
    return out;
  }

  async function check(accountId: string, reported: readonly Reported[], funded: bigint): Promise<void> {
    assert.equal(reported.length, 80);
    const ids = new Set(reported.map((r) => r.requestId));
    assert.equal(ids.size, 80, 'every call is answered under an id of its own');
    assert.ok(!ids.has(CLIENT_ID));
    for (const id of ids) assert.match(id, /^req_[0-9a-f]{35}$/);
    const total = reported.reduce((sum, r) => sum + r.cost, 0n);
    assert.ok(reported.every((r) => r.cost > 0n));
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, funded - total, 'the wallet moved by the sum of the reported costs');
    assert.equal(wallet.held, 0n);
    const charges = (await svc.ledger(accountId, 1000)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, 80);
    assert.deepEqual(new Set(charges.map((e) => e.requestId)), ids, 'the ledger entries carry the answered ids');
    assert.equal(await usageCount(accountId), 80);
    // The client's id is kept for correlation: every record can be found by it.
    const byClientId = await svc.store.db
      .selectFrom('usage_records')
      .select(['request_id'])
      .where('account_id', '=', accountId)
      .where('client_request_id', '=', CLIENT_ID)
      .execute();
    assert.equal(byClientId.length, 80);
    const holds = await svc.store.db
      .selectFrom('holds')
      .select(['request_id', 'client_request_id'])
      .where('account_id', '=', accountId)
      .execute();
    assert.equal(holds.length, 80);
    assert.ok(holds.every((h) => h.client_request_id === CLIENT_ID && ids.has(h.request_id)));
  }

  it('charges 20 chat, 20 streamed, 20 Responses and 20 tool calls that share one x-request-id', async () => {
    const funded = 10_000_000n;
    const { key, accountId } = await svc.createFundedKey(funded);
    await check(accountId, await runAll([key]), funded);
  });

  it('does the same for two keys of one account', async () => {
    const funded = 10_000_000n;
    const { key, accountId } = await svc.createFundedKey(funded);
    const second = await svc.core.keys.create({ accountId, name: 'second' });
    await check(accountId, await runAll([key, second.secret]), funded);
  });

  it('keeps the usage records of two accounts apart even under one request id', async () => {
    const a = await svc.createFundedKey(0, 'usage-a');
    const b = await svc.createFundedKey(0, 'usage-b');
    const row = (accountId: string, keyId: string) => ({
      request_id: 'req_shared_by_two_accounts',
      client_request_id: null,
      account_id: accountId,
      key_id: keyId,
      kind: 'tool',
      resource: 'maps_search_places',
      provider: 'sandbox',
      input_tokens: 0n,
      output_tokens: 0n,
      cost: 460n,
      status: 'ok',
      error_code: null,
      latency_ms: 1n,
      created_at: BigInt(Date.now()),
    });
    await svc.store.db.insertInto('usage_records').values(row(a.accountId, a.keyId)).execute();
    await svc.store.db.insertInto('usage_records').values(row(b.accountId, b.keyId)).execute();
    assert.equal(await usageCount(a.accountId), 1);
    assert.equal(await usageCount(b.accountId), 1);
  });
});
