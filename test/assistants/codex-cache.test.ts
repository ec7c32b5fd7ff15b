import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeCachingUpstream, type CachingRequestSeen, type FakeCachingUpstream } from '../fakes/caching-upstream';
import { CACHE_KINDS, assertTurnsCharged, cacheModel, cachingModels } from '../helpers/cache-matrix';
import { clientBin, requireClient } from '../helpers/clients';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * The real Codex CLI (`codex exec`, then `codex exec resume --last` twice) against svc in front of
 * upstream fakes that cache as the providers document (issue 42, SPEC §13), on each upstream
 * kind: `openai-responses` (passed through), `openai` (translated, under Codex's own
 * `prompt_cache_key`), `anthropic` (translated, with svc's breakpoints) and `gemini` (implicit
 * prefix caching): from the second turn on, each turn reads from the cache what the turn before
 * sent, and each turn is charged the tariff over the tiers the fake reported for it.
 */

const CODEX_BIN = clientBin('codex', process.env['SVC_CODEX_BIN']);

function runCodex(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(CODEX_BIN, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

describe('Codex through svc reads the upstream cache (issue 42)', function () {
  this.timeout(300_000);
  let up: FakeCachingUpstream;
  let svc: TestSvc;
  let home: string;

  before(async function () {
    requireClient(this, CODEX_BIN, 'Codex CLI', 'SVC_CODEX_BIN');
    up = await startFakeCachingUpstream();
    svc = await startSvc({ config: `models:${cachingModels(up, 'cx')}` });
  });
  beforeEach(async () => {
    up.reset();
    home = await mkdtemp(path.join(os.tmpdir(), 'svc-codex-cache-'));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });

  for (const kind of CACHE_KINDS)
    it(`${kind} upstream: turns 2 and 3 of a session read the previous turn from the cache; each turn charged its tiers`, async () => {
      const model = cacheModel('cx', kind);
      const funded = await svc.createFundedKey(100_000_000);
      const { key } = funded;
      const codexHome = path.join(home, 'codex-home');
      const work = path.join(home, 'work');
      await mkdir(codexHome, { recursive: true });
      await mkdir(work, { recursive: true });
      const base = `${svc.baseUrl}/v1/openai`;
      await writeFile(
        path.join(codexHome, 'config.toml'),
        `model = "${model}"
model_provider = "svc"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.svc]
name = "svc"
base_url = "${base}"
wire_api = "responses"
env_key = "SVC_API_KEY"
model_catalog_url = "${base}/models"
`,
      );
      const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'], HOME: home, CODEX_HOME: codexHome, SVC_API_KEY: key };
      const turns = [
        ['exec', '--skip-git-repo-check', '--json', 'Say hello.'],
        ['exec', '--skip-git-repo-check', '--json', 'resume', '--last', 'Say hello again.'],
        ['exec', '--skip-git-repo-check', '--json', 'resume', '--last', 'And once more.'],
      ];
      for (const args of turns) {
        const run = await runCodex(args, env, work);
        assert.equal(run.code, 0, run.out.slice(-4000));
      }
      const seen = up.requests;
      assert.equal(seen.length, 3, `three turns (${up.requests.map((r) => r.path).join(', ')})`);
      assert.ok(seen.every((r) => r.wire === kind));
      if (kind === 'openai' || kind === 'openai-responses') {
        const keys = new Set(seen.map((r) => r.body['prompt_cache_key']));
        assert.equal(keys.size, 1, "one session, one cache key (Codex's own)");
      }
      for (let t = 1; t < seen.length; t++) {
        const prev = (seen[t - 1] as CachingRequestSeen).cache.prompt;
        const read = (seen[t] as CachingRequestSeen).cache.read;
        // OpenAI's cache reads in 128-token steps: a turn reads all but the last step at most.
        assert.ok(read >= prev - 128, `turn ${t + 1} read ${read} of the previous ${prev} prompt tokens`);
      }
      await assertTurnsCharged(svc, funded, seen);
    });
});
