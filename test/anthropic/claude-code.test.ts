import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { clientBin, requireClient } from '../helpers/clients';
import { startAnthropicFixture, type AnthropicFixture } from './fixture';

/*
 * Claude Code (`@anthropic-ai/claude-code`) in print mode against svc: ANTHROPIC_BASE_URL at
 * /v1/anthropic, an svc_sk_ key, every model variable at svc-pro, a temporary HOME, stdin
 * closed, and every connection other than to 127.0.0.1 sent to a dead proxy. The binary is
 * test/clients/node_modules/.bin/claude, or SVC_CLAUDE_BIN.
 */

const CLAUDE = clientBin('claude', process.env['SVC_CLAUDE_BIN']);

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(CLAUDE, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('Claude Code on svc (claude -p)', function () {
  this.timeout(180_000);
  let fx: AnthropicFixture;
  let tools: FakeToolProviders;
  let home: string;

  before(async function () {
    requireClient(this, CLAUDE, 'Claude Code', 'SVC_CLAUDE_BIN');
    tools = await startFakeToolProviders();
    fx = await startAnthropicFixture({
      extraConfig: `tools:\n  shopping_search:\n    provider: torob\n    base_url: ${tools.baseUrl('torob')}\n    price: 230\n    timeout_ms: 3000\n`,
      extraModels: () => '',
    });
  });
  beforeEach(async () => {
    fx.upstream.reset();
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-claude-'));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });
  after(async () => {
    await fx?.close();
    await tools?.close();
  });

  function env(key: string): NodeJS.ProcessEnv {
    const model = 'svc-pro';
    return {
      PATH: process.env['PATH'],
      HOME: home,
      CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
      ANTHROPIC_BASE_URL: fx.anthropicURL,
      ANTHROPIC_API_KEY: key,
      ANTHROPIC_MODEL: model,
      ANTHROPIC_SMALL_FAST_MODEL: model,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
      ANTHROPIC_DEFAULT_SONNET_MODEL: model,
      ANTHROPIC_DEFAULT_OPUS_MODEL: model,
      DISABLE_AUTOUPDATER: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      // Claude Code's default: MCP tools deferred behind its ToolSearch (svc serves defer_loading).
      // Nothing but svc: any other destination goes to a closed port.
      HTTPS_PROXY: 'http://127.0.0.1:9',
      HTTP_PROXY: 'http://127.0.0.1:9',
      NO_PROXY: '127.0.0.1,localhost',
    };
  }

  async function usage(accountId: string): Promise<{ kind: string; cost: bigint; status: string }[]> {
    const rows = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'cost', 'status'])
      .where('account_id', '=', accountId)
      .execute();
    return rows.map((r) => ({ kind: r.kind, cost: BigInt(r.cost), status: r.status }));
  }

  it('a turn completes on svc-pro and is billed', async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Hello from svc.',
      usage: { prompt_tokens: 12000, completion_tokens: 7 },
    });
    const result = await run(['-p', 'Say hello', '--model', 'svc-pro', '--output-format', 'json'], env(key), home);
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    const out = JSON.parse(result.stdout) as { result: string; is_error: boolean };
    assert.equal(out.is_error, false, result.stdout);
    assert.equal(out.result, 'Hello from svc.');
    const turns = fx.upstream.requests.filter((r) => r.path.endsWith('/chat/completions'));
    assert.equal(turns.length, 1, 'one model turn');
    assert.equal(turns[0]?.body['stream'], true);
    const records = await usage(accountId);
    assert.deepEqual(
      records.map((r) => [r.kind, r.status]),
      [['chat', 'ok']],
    );
    const w = await fx.settled(accountId);
    assert.equal(w.balance, 10_000_000n - (records[0]?.cost ?? 0n));
    assert.ok((records[0]?.cost ?? 0n) > 0n);
  });

  it("with svc's MCP server added, a tool round trip works and is billed", async () => {
    const { key, accountId } = await fx.fund(10_000_000);
    const added = await run(
      [
        'mcp',
        'add',
        '--transport',
        'http',
        '-s',
        'user',
        'svc',
        `${fx.svc.baseUrl}/v1/mcp`,
        '--header',
        `Authorization: Bearer ${key}`,
      ],
      env(key),
      home,
    );
    assert.equal(added.code, 0, `${added.stdout}\n${added.stderr}`);
    // Claude Code (2.1.332) defers MCP tools behind its ToolSearch: the model searches, Claude Code
    // answers with a tool_reference, and from that turn svc offers the found tool (issue 32).
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_search_1', name: 'ToolSearch', arguments: '{"query":"select:mcp__svc__shopping_search"}' }],
        usage: { prompt_tokens: 11000, completion_tokens: 15 },
      },
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_shop_1', name: 'mcp__svc__shopping_search', arguments: '{"query":"tv"}' }],
        usage: { prompt_tokens: 12000, completion_tokens: 20 },
      },
      { kind: 'text', text: 'Found some TVs.', usage: { prompt_tokens: 12500, completion_tokens: 5 } },
    );
    const result = await run(
      [
        '-p',
        'Find a TV',
        '--model',
        'svc-pro',
        '--output-format',
        'json',
        '--allowedTools',
        'mcp__svc__shopping_search',
      ],
      env(key),
      home,
    );
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    const out = JSON.parse(result.stdout) as { result: string; is_error: boolean };
    assert.equal(out.result, 'Found some TVs.', result.stdout);
    const turns = fx.upstream.requests.filter((r) => r.path.endsWith('/chat/completions'));
    assert.equal(turns.length, 3, 'three model turns: tool search, the tool, the answer');
    const toolNames = (i: number): string[] =>
      (turns[i]?.body['tools'] as { function: { name: string } }[]).map((t) => t.function.name);
    assert.ok(toolNames(0).includes('ToolSearch'), toolNames(0).join());
    assert.ok(!toolNames(0).includes('mcp__svc__shopping_search'), `deferred until found: ${toolNames(0).join()}`);
    assert.ok(toolNames(1).includes('mcp__svc__shopping_search'), toolNames(1).join());
    const found = (turns[1]?.body['messages'] as { role: string; content?: unknown }[]).find((m) => m.role === 'tool');
    assert.match(JSON.stringify(found?.content), /mcp__svc__shopping_search' is now available/);
    const messages = turns[2]?.body['messages'] as { role: string; tool_call_id?: string; content?: unknown }[];
    const answer = messages.find((m) => m.role === 'tool' && m.tool_call_id === 'call_shop_1');
    assert.equal(answer?.tool_call_id, 'call_shop_1');
    assert.ok(JSON.stringify(answer?.content).length > 20, 'the tool result went back to the model');
    assert.equal(tools.requestsTo('torob').length, 1, 'the shopping provider was called once');

    const records = await usage(accountId);
    const kinds = records.map((r) => r.kind).sort();
    assert.deepEqual(
      kinds,
      ['chat', 'chat', 'chat', 'tool'],
      JSON.stringify(records, (_, v: unknown) => String(v)),
    );
    assert.equal(records.find((r) => r.kind === 'tool')?.cost, 230n);
    const w = await fx.settled(accountId);
    assert.equal(w.balance, 10_000_000n - records.reduce((sum, r) => sum + r.cost, 0n));
  });
});
