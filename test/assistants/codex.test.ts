import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { clientBin, requireClient } from '../helpers/clients';
import { configA } from '../mcp/helpers';
import {
  FAKE_RESPONSES_KEY,
  startFakeResponsesUpstream,
  type FakeResponsesUpstream,
} from '../fakes/openai-responses-upstream';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M, startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

type Json = Record<string, unknown>;

// test/clients' binary (@openai/codex), or one installed elsewhere (SVC_CODEX_BIN).
const CODEX_BIN = clientBin('codex', process.env['SVC_CODEX_BIN']);

/** Runs `codex exec` to its end, stdin closed; resolves with its exit code and output. */
function runCodex(
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(CODEX_BIN, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('Codex CLI on svc (Responses wire, svc as MCP server)', function () {
  this.timeout(120_000);
  let fakes: FakeToolProviders;
  let fx: OpenAiFixture;
  let home: string;

  before(async function () {
    requireClient(this, CODEX_BIN, 'Codex CLI', 'SVC_CODEX_BIN');
    fakes = await startFakeToolProviders();
    fx = await startOpenAiFixture({ extraConfig: () => configA(fakes) });
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-codex-'));
  });
  after(async () => {
    await fx?.close();
    await fakes?.close();
    if (home !== undefined) await rm(home, { recursive: true, force: true });
  });

  it('completes the MCP tool loop: the namespaced tool goes upstream as a function, runs once, is charged once', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const codexHome = path.join(home, 'codex-home');
    const work = path.join(home, 'work');
    await mkdir(codexHome, { recursive: true });
    await mkdir(work, { recursive: true });
    const svcUrl = fx.baseURL.replace(/\/v1\/openai$/, '');
    await writeFile(
      path.join(codexHome, 'config.toml'),
      `model = "svc-pro"
model_provider = "svc"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.svc]
name = "svc"
base_url = "${fx.baseURL}"
wire_api = "responses"
env_key = "SVC_API_KEY"
model_catalog_url = "${fx.baseURL}/models"

[mcp_servers.svc]
url = "${svcUrl}/v1/mcp"
bearer_token_env_var = "SVC_API_KEY"
`,
    );
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [
          {
            id: 'call_maps',
            name: 'mcp__svc__maps_search_places',
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
    const env: NodeJS.ProcessEnv = {
      PATH: process.env['PATH'],
      HOME: home,
      CODEX_HOME: codexHome,
      SVC_API_KEY: key,
    };
    const run = await runCodex(
      ['exec', '--skip-git-repo-check', '--json', 'Find Vali-e Asr square in Tehran with the svc maps tool.'],
      env,
      work,
    );
    const detail = `exit ${run.code}\nstdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;
    assert.equal(run.code, 0, detail);
    assert.match(run.stdout, /Vali-e Asr Square is the nearest match\./, detail);
    // With model_catalog_url, Codex reads svc's catalog: no "Model metadata for `svc-pro` not found".
    assert.doesNotMatch(run.stdout + run.stderr, /Model metadata for/, detail);

    const responsesCalls = fx.upstream.requests;
    assert.equal(responsesCalls.length, 2, detail);
    const offered = (responsesCalls[0]?.body['tools'] as { function: { name: string } }[]).map((t) => t.function.name);
    for (const name of ['mcp__svc__maps_search_places', 'mcp__svc__web_search', 'mcp__svc__shopping_search'])
      assert.ok(offered.includes(name), `${name} offered upstream as a function: ${offered.join(', ')}`);
    const messages = responsesCalls[1]?.body['messages'] as Json[];
    const toolMessage = messages.find((m) => m['role'] === 'tool');
    assert.equal(toolMessage?.['tool_call_id'], 'call_maps');
    assert.match(
      String(toolMessage?.['content']),
      /میدان ولیعصر/,
      `the MCP tool result went back to the model: ${JSON.stringify(toolMessage)}`,
    );
    assert.equal(fakes.requestsTo('neshan').length, 1, 'the maps provider was called once');

    // Exactly one tool charge (the maps tariff, 460) and the two model turns.
    const ledger = await fx.svc.ledger(accountId);
    const charges = ledger.filter((e) => e.kind === 'charge');
    assert.equal(
      charges.length,
      3,
      JSON.stringify(ledger, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    );
    assert.equal(await fx.balance(accountId), 1_000_000n - 460n - expectedCost(900, 20) - expectedCost(1200, 12));
  });

  /** A fresh CODEX_HOME with `config` and a work directory; the env to run Codex in. */
  async function codexSetup(
    name: string,
    config: string,
    key: string,
  ): Promise<{ env: NodeJS.ProcessEnv; work: string }> {
    const codexHome = path.join(home, `${name}-home`);
    const work = path.join(home, `${name}-work`);
    await mkdir(codexHome, { recursive: true });
    await mkdir(work, { recursive: true });
    await writeFile(path.join(codexHome, 'config.toml'), config);
    return { env: { PATH: process.env['PATH'], HOME: home, CODEX_HOME: codexHome, SVC_API_KEY: key }, work };
  }

  it('with the provider named "OpenAI", a forced remote compaction inside one codex exec gets exactly one compaction item', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const svcUrl = fx.baseURL.replace(/\/v1\/openai$/, '');
    const { env, work } = await codexSetup(
      'openai-named',
      `model = "svc-pro"
model_provider = "openai-compatible"
approval_policy = "never"
sandbox_mode = "read-only"
model_auto_compact_token_limit = 500

[model_providers.openai-compatible]
name = "OpenAI"
base_url = "${fx.baseURL}"
wire_api = "responses"
env_key = "SVC_API_KEY"

[mcp_servers.svc]
url = "${svcUrl}/v1/mcp"
bearer_token_env_var = "SVC_API_KEY"
`,
      key,
    );
    fx.upstream.reset();
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_maps', name: 'mcp__svc__maps_search_places', arguments: '{"query":"Tajrish","limit":1}' }],
        usage: { prompt_tokens: 900, completion_tokens: 20 },
      },
      {
        kind: 'text',
        text: 'SUMMARY: the user wants Tajrish; maps tool called.',
        usage: { prompt_tokens: 950, completion_tokens: 15 },
      },
      { kind: 'text', text: 'Tajrish Square found.', usage: { prompt_tokens: 300, completion_tokens: 5 } },
    );
    const run = await runCodex(
      ['exec', '--skip-git-repo-check', '--json', 'Find Tajrish square with the svc maps tool.'],
      env,
      work,
    );
    const detail = `exit ${run.code}\nstdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;
    assert.equal(run.code, 0, detail);
    assert.match(run.stdout, /Tajrish Square found\./, detail);
    const bodies = fx.upstream.requests.map((r) => JSON.stringify(r.body));
    const compactions = bodies.filter((b) => b.includes('CONTEXT CHECKPOINT COMPACTION'));
    assert.equal(compactions.length, 1, `one compaction request: ${detail}`);
    // The turn after it is served from the opened summary.
    assert.ok(bodies[bodies.length - 1]?.includes('SUMMARY: the user wants Tajrish'), detail);
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.equal(
      charges.length,
      fx.upstream.requests.length + 1,
      'every model turn (the compaction too) and the tool, once each',
    );
  });

  it('with supports_websockets = true, the turn runs over the WebSocket (accepted at once, no HTTP fallback) and costs what HTTP costs', async () => {
    const provider = (websockets: boolean): string => `model = "svc-pro"
model_provider = "svc"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.svc]
name = "svc"
base_url = "${fx.baseURL}"
wire_api = "responses"
env_key = "SVC_API_KEY"
${websockets ? 'supports_websockets = true\n' : ''}`;
    const usage = { prompt_tokens: 700, completion_tokens: 6 };

    /**
     * Runs the same turn on a fresh Codex home; counts, on svc's server, the upgrades with the
     * status each was answered (the first bytes written on its socket) and the HTTP requests (by
     * a listener ahead of the gateway's, whose mounts rewrite req.url).
     */
    async function turn(name: string, websockets: boolean) {
      const { key, accountId } = await fx.fund(1_000_000);
      const { env, work } = await codexSetup(name, provider(websockets), key);
      const upgrades: { url: string; answer: string }[] = [];
      const requests: string[] = [];
      const onUpgrade = (req: IncomingMessage, socket: Duplex): void => {
        const seen = { url: String(req.url), answer: '' };
        upgrades.push(seen);
        const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
        socket.write = ((chunk: unknown, ...rest: unknown[]) => {
          if (seen.answer === '') seen.answer = String(chunk).split('\r\n', 1)[0] ?? '';
          return write(chunk, ...rest);
        }) as typeof socket.write;
        // A refused upgrade (svc's socket.end with a 4xx) leaves no 101 here: the assertion below fails.
      };
      const onRequest = (req: IncomingMessage): void => void requests.push(`${req.method} ${req.url}`);
      fx.svc.server.prependListener('upgrade', onUpgrade);
      fx.svc.server.prependListener('request', onRequest);
      fx.upstream.reset();
      fx.upstream.enqueue({ kind: 'text', text: 'Hello over a socket.', usage });
      const started = performance.now();
      try {
        const run = await runCodex(['exec', '--skip-git-repo-check', '--json', 'Say hello.'], env, work);
        const seconds = (performance.now() - started) / 1000;
        const detail = `exit ${run.code}\nstdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;
        assert.equal(run.code, 0, detail);
        assert.match(run.stdout, /Hello over a socket\./, detail);
        assert.equal(fx.upstream.requests.length, 1, detail);
        return { accountId, upgrades, requests, seconds, detail };
      } finally {
        fx.svc.server.off('upgrade', onUpgrade);
        fx.svc.server.off('request', onRequest);
      }
    }

    const http = await turn('http', false);
    assert.deepEqual(http.upgrades, [], 'without supports_websockets Codex does not try the WebSocket');
    assert.equal(http.requests.filter((r) => r === 'POST /v1/openai/responses').length, 1, http.requests.join());

    const ws = await turn('websocket', true);
    assert.ok(ws.upgrades.length >= 1, `Codex connected over WebSocket: ${ws.detail}`);
    assert.deepEqual(
      ws.upgrades.map((u) => [u.url, u.answer]),
      ws.upgrades.map(() => ['/v1/openai/responses', 'HTTP/1.1 101 Switching Protocols']),
      'every upgrade, the first included, was accepted',
    );
    const posts = ws.requests.filter((r) => r.startsWith('POST '));
    assert.deepEqual(posts, [], `no HTTP fallback (no POST at all) in the WebSocket run: ${ws.requests.join()}`);

    // The same turn costs the same either way: one charge of the usage.
    for (const { accountId } of [http, ws]) {
      const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
      assert.deepEqual(
        charges.map((c) => -c.amount),
        [expectedCost(usage.prompt_tokens, usage.completion_tokens)],
      );
    }
    // Informational only (no timed assertion): the wall time of each `codex exec`.
    process.stdout.write(
      `      codex exec wall time: HTTP ${http.seconds.toFixed(2)} s (${http.requests.length} HTTP request(s), run first), ` +
        `WebSocket ${ws.seconds.toFixed(2)} s (${ws.upgrades.length} upgrade(s), ${ws.requests.length} HTTP requests: ${ws.requests.join(', ') || 'none'})\n`,
    );
  });
});

/*
 * Codex on a model whose upstream speaks the Responses API itself (`openai-responses`): the
 * Responses fast path (core/chat/fast-path.ts `usesResponsesFastPath`) hands Codex the upstream's
 * own events, with svc's id, model and cost edited in. Codex must read them unchanged, and the
 * turn must cost what its usage says, once.
 */
describe('Codex CLI on an openai-responses upstream (the Responses fast path)', function () {
  this.timeout(120_000);
  let up: FakeResponsesUpstream;
  let fx: OpenAiFixture;
  let home: string;

  before(async function () {
    requireClient(this, CODEX_BIN, 'Codex CLI', 'SVC_CODEX_BIN');
    up = await startFakeResponsesUpstream();
    fx = await startOpenAiFixture({
      extraModels: () => `
  svc-codex:
    provider: openai-responses
    base_url: ${up.baseUrl}
    api_key: ${FAKE_RESPONSES_KEY}
    upstream_model: gpt-5.1-codex-max
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
`,
    });
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-codex-fast-'));
  });
  after(async () => {
    await fx?.close();
    await up?.close();
    if (home !== undefined) await rm(home, { recursive: true, force: true });
  });

  /** One series of the svc's GET /metrics (0 when absent). */
  async function series(name: string): Promise<number> {
    const text = await fx.svc.core.metrics.registry.render();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? 0 : Number(line.slice(name.length + 1));
  }

  /**
   * One `codex exec` turn on a fresh Codex home (`extra`: more config.toml lines), the upstream
   * answering the recorded text stream; returns which path svc answered it on, and checks that
   * Codex read it and that the turn cost its usage (10 in, 2 out), once.
   */
  async function turn(name: string, extra: string): Promise<{ path: string; body: Json }> {
    const { key, accountId } = await fx.fund(1_000_000);
    const codexHome = path.join(home, `${name}-home`);
    const work = path.join(home, `${name}-work`);
    await mkdir(codexHome, { recursive: true });
    await mkdir(work, { recursive: true });
    await writeFile(
      path.join(codexHome, 'config.toml'),
      `model = "svc-codex"
model_provider = "svc"
approval_policy = "never"
sandbox_mode = "read-only"
${extra}
[model_providers.svc]
name = "svc"
base_url = "${fx.baseURL}"
wire_api = "responses"
env_key = "SVC_API_KEY"
model_catalog_url = "${fx.baseURL}/models"
`,
    );
    const fastSeries = 'svc_chat_answers_total{method="StreamResponse",path="fast"}';
    const translatedSeries = 'svc_chat_answers_total{method="StreamResponse",path="translated"}';
    const before = [await series(fastSeries), await series(translatedSeries)];
    const sent = up.requests.length;
    up.enqueue({ sample: 'openai-responses/stream-text.sse' });
    const run = await runCodex(
      ['exec', '--skip-git-repo-check', '--json', 'Say hello.'],
      { PATH: process.env['PATH'], HOME: home, CODEX_HOME: codexHome, SVC_API_KEY: key },
      work,
    );
    const detail = `exit ${run.code}\nstdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;
    assert.equal(run.code, 0, detail);
    assert.match(run.stdout, /Hello world/, detail);
    assert.equal(up.requests.length, sent + 1, detail);
    const body = up.requests[sent]?.body ?? {};
    assert.equal(body['model'], 'gpt-5.1-codex-max', "only svc's model name replaced by the upstream's");
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.deepEqual(
      charges.map((c) => -c.amount),
      [expectedCost(10, 2)],
      `${name}: the turn charged its usage once`,
    );
    const fast = (await series(fastSeries)) - (before[0] ?? 0);
    const translated = (await series(translatedSeries)) - (before[1] ?? 0);
    assert.equal(fast + translated, 1, `${name}: one Responses stream`);
    return { path: fast === 1 ? 'fast' : 'translated', body };
  }

  it('reads the passed-through stream unchanged (web search off), and the translated one with its hosted web_search; each turn charged its usage once', async () => {
    // Codex offers its hosted `web_search` tool by default: svc runs that tool itself (its own
    // providers and tariff), so the turn is translated, and the upstream is offered svc's
    // `web_search` as a function instead.
    const hosted = await turn('default', '');
    assert.equal(hosted.path, 'translated');
    const offered = (hosted.body['tools'] as Json[]).map((t) => t['type']);
    assert.ok(!offered.includes('web_search'), `no hosted tool went upstream: ${offered.join(', ')}`);

    // Without it Codex's body refers to nothing svc keeps: the upstream's own events reach Codex,
    // and its own body (custom and namespace tools, include, reasoning) reaches the upstream.
    const passed = await turn('no-web-search', 'web_search = "disabled"\n');
    assert.equal(passed.path, 'fast');
    assert.deepEqual(passed.body['include'], ['reasoning.encrypted_content']);
    const types = new Set((passed.body['tools'] as Json[]).map((t) => t['type']));
    assert.ok(
      types.has('custom') && types.has('namespace'),
      `Codex's own tools as it sent them: ${[...types].join(', ')}`,
    );
  });
});
