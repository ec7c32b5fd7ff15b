import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeCachingUpstream, type CachingRequestSeen, type FakeCachingUpstream } from '../fakes/caching-upstream';
import { CACHE_KINDS, assertTurnsCharged, cacheModel, cachingModels } from '../helpers/cache-matrix';
import { clientBin, requireClient } from '../helpers/clients';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * The real Claude Code (`claude -p`) against svc in front of upstream fakes that cache as the
 * providers document (issue 42, SPEC §13): three turns of one session (`--continue`) and a second
 * session, on each upstream kind: `anthropic` (Claude Code's own `cache_control` passed through),
 * `openai` and `openai-responses` (the translation, the account's `prompt_cache_key`) and `gemini`
 * (implicit prefix caching). From the second turn on, each main turn reads from the cache what the
 * turn before sent; the second session reads the shared prefix (tools and system prompt); no
 * billing block reaches the upstream; every call is charged the tariff over the tiers the fake
 * reported for it.
 */

const CLAUDE = clientBin('claude', process.env['SVC_CLAUDE_BIN']);

function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(CLAUDE, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

describe('Claude Code through svc reads the upstream cache (issue 42)', function () {
  this.timeout(300_000);
  let up: FakeCachingUpstream;
  let svc: TestSvc;
  let home: string;

  before(async function () {
    requireClient(this, CLAUDE, 'Claude Code', 'SVC_CLAUDE_BIN');
    up = await startFakeCachingUpstream();
    svc = await startSvc({ config: `models:${cachingModels(up, 'cc')}` });
  });
  beforeEach(async () => {
    up.reset();
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-claude-cache-'));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });

  function env(key: string, model: string): NodeJS.ProcessEnv {
    return {
      PATH: process.env['PATH'],
      HOME: home,
      CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
      ANTHROPIC_BASE_URL: `${svc.baseUrl}/v1/anthropic`,
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
      HTTPS_PROXY: 'http://127.0.0.1:9',
      HTTP_PROXY: 'http://127.0.0.1:9',
      NO_PROXY: '127.0.0.1,localhost',
    };
  }

  /** The session's main turns: the requests that carry Claude Code's tools. */
  const mainTurns = (seen: readonly CachingRequestSeen[]): CachingRequestSeen[] =>
    seen.filter((r) => Array.isArray(r.body['tools']) && (r.body['tools'] as unknown[]).length > 0);

  for (const kind of CACHE_KINDS)
    it(`${kind} upstream: turns 2 and 3 read the previous turn from the cache; a second session reads the shared prefix; each call charged its tiers`, async () => {
      const model = cacheModel('cc', kind);
      const funded = await svc.createFundedKey(100_000_000);
      const { key } = funded;
      const prompts = ['Say hello.', 'Say hello again.', 'And once more.'];
      for (const [i, prompt] of prompts.entries()) {
        const args = ['-p', prompt, '--model', model, '--output-format', 'json', ...(i > 0 ? ['--continue'] : [])];
        const result = await run(args, env(key, model), home);
        assert.equal(result.code, 0, result.out);
      }
      const first = mainTurns(up.requests);
      assert.equal(first.length, 3, `three main turns (${up.requests.length} upstream calls)`);
      for (const r of up.requests) assert.ok(!r.text.includes('x-anthropic-billing-header'), 'billing block upstream');
      for (let t = 1; t < first.length; t++) {
        const prev = (first[t - 1] as CachingRequestSeen).cache.prompt;
        const read = (first[t] as CachingRequestSeen).cache.read;
        assert.ok(read >= prev * 0.9, `turn ${t + 1} read ${read} of the previous ${prev} prompt tokens`);
      }
      const second = await run(
        ['-p', 'A new session: say hi.', '--model', model, '--output-format', 'json'],
        env(key, model),
        home,
      );
      assert.equal(second.code, 0, second.out);
      const again = mainTurns(up.requests).slice(3);
      assert.equal(again.length, 1);
      const shared = again[0] as CachingRequestSeen;
      assert.ok(shared.cache.read >= 1024, `the second session read ${shared.cache.read} tokens of the shared prefix`);
      assert.ok(up.requests.every((r) => r.wire === kind));
      await assertTurnsCharged(svc, funded, up.requests);
    });
});
