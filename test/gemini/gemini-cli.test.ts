import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { configB } from '../mcp/helpers';
import { clientBin, requireClient } from '../helpers/clients';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startGeminiFixture, type GeminiFixture } from './fixture';

type Json = Record<string, unknown>;

/*
 * Gemini CLI (`@google/gemini-cli` 0.61) in print mode against svc, as ref/clients/gemini-cli.md
 * records it: GOOGLE_GEMINI_BASE_URL at /v1/gemini, the key in GEMINI_API_KEY, a temporary HOME
 * whose settings select API-key auth, stdin closed, spawned asynchronously so that svc and the
 * fakes keep answering, and every connection other than to 127.0.0.1 sent to a dead proxy. The
 * binary is test/clients/node_modules/.bin/gemini, or SVC_GEMINI_BIN.
 */

const GEMINI = clientBin('gemini', process.env['SVC_GEMINI_BIN']);

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(GEMINI, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('Gemini CLI on svc (gemini -p)', function () {
  this.timeout(180_000);
  let fx: GeminiFixture;
  let tools: FakeToolProviders;
  let home: string;
  let work: string;

  before(async function () {
    requireClient(this, GEMINI, 'Gemini CLI', 'SVC_GEMINI_BIN');
    tools = await startFakeToolProviders();
    fx = await startGeminiFixture({ extraConfig: () => configB(tools) });
  });
  beforeEach(async () => {
    fx.upstream.reset();
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-gemini-'));
    work = path.join(home, 'work');
    await mkdir(work, { recursive: true });
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });
  after(async () => {
    await fx?.close();
    await tools?.close();
  });

  /** The settings file of the README: API-key auth, no updates, statistics or telemetry; svc's MCP server. */
  async function settings(key: string, mcp: boolean): Promise<void> {
    const value: Json = {
      security: { auth: { selectedType: 'gemini-api-key' } },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    };
    if (mcp)
      value['mcpServers'] = {
        svc: { httpUrl: `${fx.svc.baseUrl}/v1/mcp`, headers: { Authorization: `Bearer ${key}` }, trust: true },
      };
    await mkdir(path.join(home, '.gemini'), { recursive: true });
    await writeFile(path.join(home, '.gemini', 'settings.json'), JSON.stringify(value, null, 2));
  }

  function env(key: string): NodeJS.ProcessEnv {
    return {
      PATH: process.env['PATH'],
      HOME: home,
      GOOGLE_GEMINI_BASE_URL: fx.geminiURL,
      GEMINI_API_KEY: key,
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
      NO_COLOR: '1',
      // Nothing but svc: any other destination goes to a closed port.
      HTTPS_PROXY: 'http://127.0.0.1:9',
      HTTP_PROXY: 'http://127.0.0.1:9',
      NO_PROXY: '127.0.0.1,localhost',
    };
  }

  /** Every charge on the account equals what svc reported, and the wallet is down by their sum. */
  async function assertBilled(accountId: string, kinds: string[]): Promise<bigint> {
    const records = await fx.usage(accountId);
    assert.deepEqual(
      records.map((r) => r.kind).sort(),
      [...kinds].sort(),
      JSON.stringify(records, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
    );
    assert.ok(records.every((r) => r.status === 'ok'));
    const total = records.reduce((s, r) => s + r.cost, 0n);
    const ledger = await fx.svc.ledger(accountId);
    const charged = ledger.filter((e) => e.kind === 'charge').reduce((s, e) => s + -BigInt(e.amount), 0n);
    assert.equal(charged < 0n ? -charged : charged, total);
    const w = await fx.settled(accountId);
    assert.equal(w.balance, 10_000_000n - total);
    return total;
  }

  const detail = (r: Run): string =>
    `exit ${r.code}\nstdout:\n${r.stdout.slice(-3000)}\nstderr:\n${r.stderr.slice(-3000)}`;

  it('a turn on svc-pro (-m svc-pro) is one streamed call, billed', async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    await settings(key, false);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Hello from svc.',
      usage: { prompt_tokens: 9000, completion_tokens: 6 },
    });
    const r = await run(['-p', 'Say hello', '-m', 'svc-pro', '--output-format', 'json'], env(key), work);
    assert.equal(r.code, 0, detail(r));
    const out = JSON.parse(r.stdout) as { response?: string };
    assert.equal(out.response?.trim(), 'Hello from svc.', detail(r));
    assert.equal(fx.upstream.requests.length, 1, detail(r));
    assert.equal(fx.upstream.requests[0]?.body['stream'], true);
    await assertBilled(accountId, ['chat']);
  });

  it('without a model setting: the classifier and the turn both reach the default model', async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    await settings(key, false);
    fx.upstream.enqueue(
      {
        kind: 'text',
        text: '{"complexity_reasoning":"a greeting","complexity_score":5}',
        usage: { prompt_tokens: 500, completion_tokens: 20 },
      },
      { kind: 'text', text: 'Hi there.', usage: { prompt_tokens: 9000, completion_tokens: 4 } },
    );
    const r = await run(['-p', 'Say hello', '--output-format', 'json'], env(key), work);
    assert.equal(r.code, 0, detail(r));
    const out = JSON.parse(r.stdout) as { response?: string };
    assert.equal(out.response?.trim(), 'Hi there.', detail(r));
    const bodies = fx.upstream.requests.map((q) => q.body);
    // The classifier (gemini-3.5-flash-lite, a JSON schema), then the turn (gemini-3.8-flash, streamed).
    assert.equal(bodies.length, 2, detail(r));
    assert.equal((bodies[0]?.['response_format'] as Json | undefined)?.['type'], 'json_schema');
    assert.equal(bodies[1]?.['stream'], true);
    assert.ok(bodies.every((b) => b['model'] === 'fake-model-1'));
    await assertBilled(accountId, ['chat', 'chat']);
  });

  it("an MCP tool round trip through svc's /v1/mcp is billed once, with both model turns", async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    const before = tools.requestsTo('digikala').length;
    await settings(key, true);
    // Gemini CLI offers an MCP server's tools as mcp_<server>_<tool>.
    const name = 'mcp_svc_shopping_search';
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_shop', name, arguments: '{"query":"tv"}' }],
        usage: { prompt_tokens: 9000, completion_tokens: 20 },
      },
      { kind: 'text', text: 'Found some TVs.', usage: { prompt_tokens: 9500, completion_tokens: 5 } },
    );
    const r = await run(['-p', 'Find a TV', '-m', 'svc-pro', '--output-format', 'json'], env(key), work);
    assert.equal(r.code, 0, detail(r));
    const out = JSON.parse(r.stdout) as { response?: string };
    assert.equal(out.response?.trim(), 'Found some TVs.', detail(r));
    assert.equal(fx.upstream.requests.length, 2, detail(r));
    const offered = (fx.upstream.requests[0]?.body['tools'] as Json[]).map((t) =>
      String((t['function'] as Json)['name']),
    );
    assert.ok(offered.includes(name), offered.join(', '));
    const messages = fx.upstream.requests[1]?.body['messages'] as Json[];
    const answer = messages.find((m) => m['role'] === 'tool');
    assert.ok(String(answer?.['tool_call_id']).length > 0);
    assert.ok(JSON.stringify(answer?.['content']).length > 20, 'the tool result went back to the model');
    assert.equal(tools.requestsTo('digikala').length, before + 1, 'the shopping provider was called once');
    const records = await fx.usage(accountId);
    assert.equal(records.find((x) => x.kind === 'tool')?.cost, 230n);
    await assertBilled(accountId, ['chat', 'chat', 'tool']);
  });

  it("google_web_search is served by svc's web_search, billed at its tariff", async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    const before = tools.requestsTo('searxng').length;
    await settings(key, false);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_gws', name: 'google_web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 9000, completion_tokens: 15 },
      },
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_ws', name: 'web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 60, completion_tokens: 10 },
      },
      {
        kind: 'text',
        text: 'The notes are at https://fastapi.tiangolo.com/release-notes/',
        usage: { prompt_tokens: 400, completion_tokens: 20 },
      },
      {
        kind: 'text',
        text: 'FastAPI publishes its release notes online.',
        usage: { prompt_tokens: 9600, completion_tokens: 9 },
      },
    );
    const r = await run(
      ['-p', 'Search the web for the fastapi release notes', '-m', 'svc-pro', '--output-format', 'json'],
      env(key),
      work,
    );
    assert.equal(r.code, 0, detail(r));
    const out = JSON.parse(r.stdout) as { response?: string };
    assert.equal(out.response?.trim(), 'FastAPI publishes its release notes online.', detail(r));
    assert.equal(tools.requestsTo('searxng').length, before + 1, 'one web search');
    // The CLI's turn saw the search's answer with its sources.
    const last = fx.upstream.requests.at(-1)?.body['messages'] as Json[];
    const result = JSON.stringify(last.find((m) => m['role'] === 'tool')?.['content']);
    assert.match(result, /fastapi\.tiangolo\.com/, result);
    // The search loop (two turns and the search, 150 credits) is one hold and one charge.
    await assertBilled(accountId, ['chat', 'chat', 'responses']);
  });

  it('google_web_search without a model setting: classifier, turn, search call, answer; all billed', async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    const before = tools.requestsTo('searxng').length;
    await settings(key, false);
    fx.upstream.enqueue(
      {
        kind: 'text',
        text: '{"complexity_reasoning":"one search","complexity_score":10}',
        usage: { prompt_tokens: 500, completion_tokens: 20 },
      },
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_gws', name: 'google_web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 9000, completion_tokens: 15 },
      },
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_ws', name: 'web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 60, completion_tokens: 10 },
      },
      {
        kind: 'text',
        text: 'The notes are at https://fastapi.tiangolo.com/release-notes/',
        usage: { prompt_tokens: 400, completion_tokens: 20 },
      },
      { kind: 'text', text: 'Release notes found.', usage: { prompt_tokens: 9600, completion_tokens: 4 } },
    );
    const r = await run(
      ['-p', 'Search the web for the fastapi release notes', '--output-format', 'json'],
      env(key),
      work,
    );
    assert.equal(r.code, 0, detail(r));
    const out = JSON.parse(r.stdout) as { response?: string };
    assert.equal(out.response?.trim(), 'Release notes found.', detail(r));
    assert.equal(tools.requestsTo('searxng').length, before + 1, 'one web search');
    await assertBilled(accountId, ['chat', 'chat', 'chat', 'responses']);
  });
});

describe('Gemini CLI on the built-in configuration (offline sandbox model, no config file)', function () {
  this.timeout(180_000);
  let svc: TestSvc;
  let home: string;

  before(async function () {
    requireClient(this, GEMINI, 'Gemini CLI', 'SVC_GEMINI_BIN');
    svc = await startSvc();
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-gemini-builtin-'));
  });
  after(async () => {
    await svc?.close();
    if (home !== undefined) await rm(home, { recursive: true, force: true });
  });

  it("without a model setting, Gemini CLI's own model names reach svc-pro and a turn completes", async () => {
    const { key, accountId } = await svc.createFundedKey(10_000_000);
    await mkdir(path.join(home, '.gemini'), { recursive: true });
    await writeFile(
      path.join(home, '.gemini', 'settings.json'),
      JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } }, telemetry: { enabled: false } }),
    );
    const r = await run(
      ['-p', 'Say hello', '--output-format', 'json'],
      {
        PATH: process.env['PATH'],
        HOME: home,
        GOOGLE_GEMINI_BASE_URL: `${svc.baseUrl}/v1/gemini`,
        GEMINI_API_KEY: key,
        GEMINI_CLI_TRUST_WORKSPACE: 'true',
        HTTPS_PROXY: 'http://127.0.0.1:9',
        HTTP_PROXY: 'http://127.0.0.1:9',
        NO_PROXY: '127.0.0.1,localhost',
      },
      home,
    );
    assert.equal(r.code, 0, `exit ${r.code}\n${r.stdout}\n${r.stderr.slice(-3000)}`);
    const out = JSON.parse(r.stdout) as { response?: string };
    assert.match(out.response ?? '', /\[sandbox\]/);
    const records = await svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'resource', 'cost', 'status'])
      .where('account_id', '=', accountId)
      .execute();
    // The classifier and the turn, both on the built-in svc-pro.
    assert.deepEqual(
      records.map((x) => [x.kind, x.resource, x.status]),
      [
        ['chat', 'svc-pro', 'ok'],
        ['chat', 'svc-pro', 'ok'],
      ],
    );
    const w = await svc.wallet(accountId);
    assert.equal(w.balance, 10_000_000n - records.reduce((sum, x) => sum + BigInt(x.cost), 0n));
  });
});
