import assert from 'node:assert/strict';
import { startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * SPEC §7d: GET /models keeps OpenAI's list shape; with `client_version` (Codex 0.156+) it answers
 * Codex's catalog, `{"models": [...]}` with an ETag and a 304 for an unchanged one. Each entry of
 * either shape says its kind. `x-codex-turn-state` comes back on every response that sent it.
 */

type Obj = Record<string, unknown>;

// The fields Codex's ModelInfo requires (openai/codex codex-rs/protocol/src/openai_models.rs):
// without any of them Codex fails with "missing field".
const CODEX_REQUIRED = [
  'slug',
  'display_name',
  'description',
  'supported_reasoning_levels',
  'shell_type',
  'visibility',
  'supported_in_api',
  'priority',
  'upgrade',
  'base_instructions',
  'supports_reasoning_summaries',
  'support_verbosity',
  'default_verbosity',
  'apply_patch_tool_type',
  'truncation_policy',
  'supports_parallel_tool_calls',
  'experimental_supported_tools',
];

describe('OpenAI API: the model list in both shapes (OpenAI and Codex)', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({
      extraConfig: `
  svc-embed:
    kind: embedding
    provider: sandbox
    dimensions: 8
    price: { input_per_1m: 1000 }
`,
    });
  });
  after(async () => {
    await fx.close();
  });

  const get = (path: string, key: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${fx.baseURL}${path}`, { headers: { authorization: `Bearer ${key}`, ...headers } });

  it("keeps OpenAI's list shape without client_version, each model with its kind", async () => {
    const { key } = await fx.fund(1000);
    const page = await fx.client(key).models.list();
    const kinds = Object.fromEntries(page.data.map((m) => [m.id, (m as unknown as Obj)['kind']]));
    assert.equal(kinds['svc-pro'], 'chat');
    assert.equal(kinds['svc-embed'], 'embedding');
  });

  it("answers Codex's catalog for ?client_version=, with an ETag and a 304 when unchanged", async () => {
    const { key } = await fx.fund(1000);
    const response = await get('/models?client_version=0.171.0', key);
    assert.equal(response.status, 200);
    const body = (await response.json()) as { models: Obj[] };
    assert.deepEqual(Object.keys(body), ['models']);
    const pro = body.models.find((m) => m['slug'] === 'svc-pro');
    assert.ok(pro);
    for (const field of CODEX_REQUIRED) assert.ok(field in pro, `missing ${field}`);
    assert.equal(pro['kind'], 'chat');
    assert.equal(pro['visibility'], 'list');
    assert.equal(pro['context_window'], 128000);
    const embed = body.models.find((m) => m['slug'] === 'svc-embed');
    assert.equal(embed?.['kind'], 'embedding');
    assert.equal(embed?.['supported_in_api'], false);
    const etag = response.headers.get('etag');
    assert.match(etag ?? '', /^".+"$/);
    const again = await get('/models?client_version=0.171.0', key, { 'if-none-match': etag ?? '' });
    assert.equal(again.status, 304);
    assert.equal(await again.text(), '');
    const stale = await get('/models?client_version=0.171.0', key, { 'if-none-match': '"old"' });
    assert.equal(stale.status, 200);
  });

  it('echoes x-codex-turn-state on every response of the turn, streams and errors included', async () => {
    const { key } = await fx.fund(100_000);
    const turn = { 'x-codex-turn-state': 'ts_abc123' };
    const models = await get('/models?client_version=0.171.0', key, turn);
    assert.equal(models.headers.get('x-codex-turn-state'), 'ts_abc123');
    const stream = await fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...turn },
      body: JSON.stringify({ model: 'svc-pro', input: 'hi', stream: true }),
    });
    assert.equal(stream.headers.get('x-codex-turn-state'), 'ts_abc123');
    await stream.text();
    const refused = await fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...turn },
      body: JSON.stringify({ model: 'svc-pro', input: 'hi', nope: 1 }),
    });
    assert.equal(refused.status, 400);
    assert.equal(refused.headers.get('x-codex-turn-state'), 'ts_abc123');
    const plain = await get('/models', key);
    assert.equal(plain.headers.get('x-codex-turn-state'), null);
  });
});
