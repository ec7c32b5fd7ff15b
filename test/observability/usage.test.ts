import assert from 'node:assert/strict';
import { ClientError, Metadata, Status } from 'nice-grpc';
import OpenAI from 'openai';
import type { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import type { UsageRecord } from '../../gen/svc/core/v1/usage';
import { runSvc } from '../cli/run-svc';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { connectClient } from '../mcp/helpers';

function expectStatus(code: Status) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof ClientError, String(error));
    assert.equal(error.code, code, error.details);
    return true;
  };
}

describe('usage history (UsageService and svc usage)', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let a: FundedKey;
  let a2: { keyId: string; key: string };
  let b: FundedKey;
  const asKey = (key: string) => ({ metadata: new Metadata({ authorization: `Bearer ${key}` }) });
  const admin = () => ({ metadata: new Metadata({ authorization: `Bearer ${svc.adminToken}` }) });
  const usage = () => svc.connection.clients.usage;

  async function search(key: string, query: string): Promise<void> {
    const client: McpClient = await connectClient(svc.baseUrl, key);
    try {
      const result = await client.callTool({ name: 'web_search', arguments: { query } });
      assert.notEqual(result.isError, true, JSON.stringify(result));
    } finally {
      await client.close();
    }
  }

  async function chargesOf(accountId: string): Promise<Map<string, bigint>> {
    const entries = await svc.ledger(accountId, 1000);
    return new Map(entries.filter((e) => e.kind === 'charge').map((e) => [e.requestId, -e.amount]));
  }

  before(async function () {
    // The built-in sandbox configuration: model svc-pro and the three tools, all offline.
    svc = await startSvc();
    a = await svc.createFundedKey(1_000_000, 'usage a');
    const second = await svc.core.keys.create({ accountId: a.accountId, name: 'second key' });
    a2 = { keyId: second.key.id, key: second.secret };
    b = await svc.createFundedKey(1_000_000, 'usage b');

    for (const q of ['first', 'second', 'third']) await search(a.key, `tehran ${q}`);
    const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: a2.key, maxRetries: 0 });
    await openai.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hello usage' }] });
    await search(b.key, 'other account');
  });

  after(async () => {
    await svc?.close();
  });

  it('lists a key’s own account, newest first, with the ledger’s costs and request ids', async () => {
    const page = await usage().listUsage({ pageSize: 100 }, asKey(a.key));
    assert.equal(page.records.length, 4);
    assert.equal(page.nextPageToken, '');
    assert.ok(page.records.every((r) => r.accountId === a.accountId));
    const times = page.records.map((r) => r.createdAt?.getTime() ?? 0);
    assert.deepEqual(
      times,
      [...times].sort((x, y) => y - x),
      'newest first',
    );
    const charges = await chargesOf(a.accountId);
    assert.equal(charges.size, 4);
    for (const r of page.records) {
      assert.equal(r.status, 'ok');
      assert.ok(r.cost > 0n);
      assert.equal(r.cost, charges.get(r.requestId), `usage record ${r.requestId} and its ledger charge agree`);
    }
    const chat = page.records.find((r) => r.kind === 'chat');
    assert.ok(chat);
    assert.equal(chat.model, 'svc-pro');
    assert.equal(chat.tool, '');
    assert.equal(chat.keyId, a2.keyId);
    assert.ok(chat.inputTokens > 0n && chat.outputTokens > 0n);
    const tools = page.records.filter((r) => r.kind === 'tool');
    assert.equal(tools.length, 3);
    assert.ok(
      tools.every((r) => r.tool === 'web_search' && r.model === '' && r.keyId === a.keyId && r.provider === 'sandbox'),
    );
  });

  it('pages with a cursor: every record once, in order', async () => {
    const seen: UsageRecord[] = [];
    let token = '';
    let pages = 0;
    do {
      const page = await usage().listUsage({ pageSize: 3, pageToken: token }, asKey(a.key));
      seen.push(...page.records);
      token = page.nextPageToken;
      pages += 1;
    } while (token !== '' && pages < 10);
    assert.equal(pages, 2);
    assert.equal(seen.length, 4);
    assert.equal(new Set(seen.map((r) => r.requestId)).size, 4);
    const all = await usage().listUsage({ pageSize: 100 }, asKey(a.key));
    assert.deepEqual(
      seen.map((r) => r.requestId),
      all.records.map((r) => r.requestId),
    );
  });

  it('filters by key, model, tool and time', async () => {
    const byKey = await usage().listUsage(
      { filter: { accountId: '', keyId: a2.keyId, model: '', tool: '' } },
      asKey(a.key),
    );
    assert.deepEqual(
      byKey.records.map((r) => r.model),
      ['svc-pro'],
    );
    const byTool = await usage().listUsage(
      { filter: { accountId: '', keyId: '', model: '', tool: 'web_search' } },
      asKey(a.key),
    );
    assert.equal(byTool.records.length, 3);
    const byModel = await usage().listUsage(
      { filter: { accountId: '', keyId: '', model: 'svc-pro', tool: '' } },
      asKey(a.key),
    );
    assert.equal(byModel.records.length, 1);
    const future = new Date(Date.now() + 3_600_000);
    const none = await usage().listUsage(
      { filter: { accountId: '', keyId: '', model: '', tool: '', since: future } },
      asKey(a.key),
    );
    assert.equal(none.records.length, 0);
    const before = await usage().listUsage(
      { filter: { accountId: '', keyId: '', model: '', tool: '', until: future } },
      asKey(a.key),
    );
    assert.equal(before.records.length, 4);
  });

  it('keeps a key to its own account; the admin sees any account, or all', async () => {
    await assert.rejects(
      usage().listUsage({ filter: { accountId: b.accountId, keyId: '', model: '', tool: '' } }, asKey(a.key)),
      expectStatus(Status.PERMISSION_DENIED),
    );
    await assert.rejects(usage().listUsage({}), expectStatus(Status.UNAUTHENTICATED));
    const onlyB = await usage().listUsage(
      { filter: { accountId: b.accountId, keyId: '', model: '', tool: '' } },
      admin(),
    );
    assert.equal(onlyB.records.length, 1);
    assert.equal(onlyB.records[0]?.accountId, b.accountId);
    const everyone = await usage().listUsage({ pageSize: 1000 }, admin());
    const accounts = new Set(everyone.records.map((r) => r.accountId));
    assert.ok(accounts.has(a.accountId) && accounts.has(b.accountId));
  });

  it('refuses bad pages and filters with INVALID_ARGUMENT', async () => {
    await assert.rejects(
      usage().listUsage({ pageToken: 'not-a-token' }, asKey(a.key)),
      expectStatus(Status.INVALID_ARGUMENT),
    );
    await assert.rejects(usage().listUsage({ pageSize: 5000 }, asKey(a.key)), expectStatus(Status.INVALID_ARGUMENT));
    await assert.rejects(
      usage().listUsage({ filter: { accountId: '', keyId: '', model: 'svc-pro', tool: 'web_search' } }, asKey(a.key)),
      expectStatus(Status.INVALID_ARGUMENT),
    );
  });

  it('sums per day and per model or tool, to the ledger’s total', async () => {
    const summary = await usage().getUsageSummary(
      { filter: { accountId: a.accountId, keyId: '', model: '', tool: '' } },
      admin(),
    );
    const today = new Date().toISOString().slice(0, 10);
    const search = summary.totals.find((t) => t.tool === 'web_search');
    const chat = summary.totals.find((t) => t.model === 'svc-pro');
    assert.ok(
      search && chat,
      JSON.stringify(summary.totals, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    );
    assert.equal(search.day, today);
    assert.equal(search.requests, 3n);
    assert.equal(search.chargedRequests, 3n);
    assert.equal(chat.requests, 1n);
    const charges = [...(await chargesOf(a.accountId)).values()].reduce((x, y) => x + y, 0n);
    assert.equal(summary.totalCost, charges);
    assert.equal(search.cost + chat.cost, charges);
    assert.equal(summary.totalRequests, 4n);
  });

  it('svc usage prints the same history from the database, as JSON or a table', async () => {
    const env = { SVC_DATABASE_URL: svc.databaseUrl };
    const json = await runSvc(['usage', '--account', a.accountId, '--json'], env);
    assert.equal(json.code, 0, json.stderr);
    const out = JSON.parse(json.stdout) as {
      account_id: string;
      records: { request_id: string; cost: number; tool: string | null }[];
    };
    assert.equal(out.account_id, a.accountId);
    assert.equal(out.records.length, 4);
    const charges = await chargesOf(a.accountId);
    for (const r of out.records) assert.equal(BigInt(r.cost), charges.get(r.request_id));

    const tools = JSON.parse(
      (
        await runSvc(
          ['usage', '--account', a.accountId, '--tool', 'web_search', '--since', '1h', '--limit', '2', '--json'],
          env,
        )
      ).stdout,
    ) as {
      records: unknown[];
      more: boolean;
    };
    assert.equal(tools.records.length, 2);
    assert.equal(tools.more, true);

    const daily = JSON.parse((await runSvc(['usage', '--account', a.accountId, '--daily', '--json'], env)).stdout) as {
      total_cost: number;
      total_requests: number;
    };
    assert.equal(
      BigInt(daily.total_cost),
      [...charges.values()].reduce((x, y) => x + y, 0n),
    );
    assert.equal(daily.total_requests, 4);

    const human = await runSvc(['usage', '--account', a.accountId, '--key', a2.keyId], env);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^CREATED\s+REQUEST ID/);
    assert.match(human.stdout, /svc-pro/);
    assert.doesNotMatch(human.stdout, /web_search/);
  });

  it('svc usage explains a mistyped time, filter or account', async () => {
    const env = { SVC_DATABASE_URL: svc.databaseUrl };
    const badTime = await runSvc(['usage', '--account', a.accountId, '--since', 'yesterday'], env);
    assert.equal(badTime.code, 2);
    assert.match(badTime.stderr, /--since must be an ISO date/);
    const both = await runSvc(['usage', '--account', a.accountId, '--model', 'svc-pro', '--tool', 'web_search'], env);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--model or --tool, not both/);
    const unknown = await runSvc(['usage', '--account', 'acc_doesnotexist'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /acc_doesnotexist|not found/i);
  });
});
