import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeCachingUpstream, type CachingRequestSeen, type FakeCachingUpstream } from '../fakes/caching-upstream';
import { clientBin, requireClient } from '../helpers/clients';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * The real Codex CLI (`codex exec`, then `codex exec resume --last` twice) against svc in front of
 * upstream fakes that cache as the providers document (issue 42, SPEC §13), on an
 * `openai-responses` upstream (passed through) and on an `openai` one (translated): from the
 * second turn on, each turn reads from the cache what the turn before sent, under Codex's own
 * `prompt_cache_key`.
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
    const model = (id: string, provider: string): string => `
  ${id}:
    provider: ${provider}
    base_url: ${up.baseUrl}/v1
    api_key: upstream-key
    upstream_model: up-${provider}
    price: { input_per_1m: 125000, output_per_1m: 1000000, cached_input_per_1m: 12500 }
    context_window: 200000
    max_output_tokens: 8000
`;
    svc = await startSvc({
      config: `models:${model('cx-responses', 'openai-responses')}${model('cx-openai', 'openai')}`,
    });
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

  for (const model of ['cx-responses', 'cx-openai'])
    it(`${model}: turns 2 and 3 of a session read the previous turn from the cache`, async () => {
      const { key } = await svc.createFundedKey(100_000_000);
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
      const seen = up.requests.filter((r) => r.path.endsWith('/responses') || r.path.endsWith('/chat/completions'));
      assert.equal(seen.length, 3, `three turns (${up.requests.map((r) => r.path).join(', ')})`);
      const keys = new Set(seen.map((r) => r.body['prompt_cache_key']));
      assert.equal(keys.size, 1, "one session, one cache key (Codex's own)");
      for (let t = 1; t < seen.length; t++) {
        const prev = (seen[t - 1] as CachingRequestSeen).cache.prompt;
        const read = (seen[t] as CachingRequestSeen).cache.read;
        // OpenAI's cache reads in 128-token steps: a turn reads all but the last step at most.
        assert.ok(read >= prev - 128, `turn ${t + 1} read ${read} of the previous ${prev} prompt tokens`);
      }
    });
});
