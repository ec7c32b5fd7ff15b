import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startFakeCachingUpstream, type CachingRequestSeen, type FakeCachingUpstream } from '../fakes/caching-upstream';
import { chatTurn, claudeCodeTurn, codexTurn, geminiTurn } from '../fakes/coding-sessions';

/*
 * Caching survives svc (SPEC §13, issue 42, the request side): growing coding-assistant
 * conversations through every path onto upstream fakes that cache as the providers document
 * (test/fakes/caching-upstream.ts). Each turn's upstream body starts with the previous turn's
 * (the same bytes for everything but the growing list, whose earlier elements are the same
 * bytes), no billing block reaches any upstream, turn 2 on reads the cache, and svc's cache
 * routing keys and breakpoints are what §13 says.
 */

type Obj = Record<string, unknown>;

const TURNS = 4;

describe('prompt caching through svc (SPEC §13)', function () {
  let up: FakeCachingUpstream;
  let svc: TestSvc;

  const model = (id: string, provider: string, extra = ''): string => {
    const base =
      provider === 'anthropic' ? up.baseUrl : provider === 'gemini' ? `${up.baseUrl}/v1beta` : `${up.baseUrl}/v1`;
    return `
  ${id}:
    provider: ${provider}
    base_url: ${base}
    api_key: upstream-key
    upstream_model: up-${provider}
    price: { input_per_1m: 1000, output_per_1m: 4000, cached_input_per_1m: 100, cache_write_per_1m: 1250 }
    context_window: 200000
    max_output_tokens: 4000
${extra}`;
  };

  before(async () => {
    up = await startFakeCachingUpstream();
    svc = await startSvc({
      config:
        'models:' +
        model('c-anthropic', 'anthropic') +
        model('c-openai', 'openai') +
        model('c-responses', 'openai-responses') +
        model('c-gemini', 'gemini') +
        model('c-session', 'openai', '    cache: { key: session }\n') +
        model('c-nokey', 'openai', '    cache: { key: off }\n') +
        model('c-nobreak', 'anthropic', '    cache: { breakpoints: off }\n'),
    });
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });
  beforeEach(() => up.reset());

  async function post(path: string, key: string, body: Obj, headers: Record<string, string> = {}): Promise<string> {
    const res = await fetch(`${svc.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return text;
  }

  // ---- byte stability ------------------------------------------------------------------------

  const LIST: Record<string, string> = {
    anthropic: 'messages',
    openai: 'messages',
    'openai-responses': 'input',
    gemini: 'contents',
  };

  /** A JSON value without `cache_control` markers (which move with the conversation by design). */
  function unmarked(value: unknown): unknown {
    if (Array.isArray(value)) return value.map(unmarked);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.entries(value as Obj)
        .filter(([k]) => k !== 'cache_control')
        .map(([k, v]) => [k, unmarked(v)]),
    );
  }

  /**
   * Each turn's upstream body starts with the previous turn's: every member but the growing list
   * is the same bytes, and the list's earlier elements are the same bytes in the same places.
   * Only the Anthropic breakpoints are left out of the comparison: svc puts them on the last two
   * user turns, so they move, and Anthropic's cache keys on the content, not on the markers.
   */
  function assertPrefixStable(seen: readonly CachingRequestSeen[]): void {
    assert.equal(seen.length, TURNS);
    for (let t = 1; t < seen.length; t++) {
      const prev = seen[t - 1] as CachingRequestSeen;
      const cur = seen[t] as CachingRequestSeen;
      const list = LIST[cur.wire] as string;
      const rest = (body: Obj): string => {
        const { [list]: _list, ...others } = body;
        return JSON.stringify(cur.wire === 'anthropic' ? unmarked(others) : others);
      };
      assert.equal(rest(cur.body), rest(prev.body), `turn ${t + 1}: the body around ${list} changed`);
      const before = prev.body[list] as unknown[];
      const after = cur.body[list] as unknown[];
      assert.ok(after.length > before.length, `turn ${t + 1}: ${list} did not grow`);
      // The last element of the previous turn may be followed by more of the same role only in
      // a wire that merges turns; none of these does, so every earlier element stays as it was.
      before.forEach((element, i) => {
        const norm = (v: unknown): string => JSON.stringify(cur.wire === 'anthropic' ? unmarked(v) : v);
        assert.equal(norm(after[i]), norm(element), `turn ${t + 1}: ${list}[${i}] changed`);
      });
      // And the raw bytes: the previous body's text up to its list's earlier elements is a prefix.
      if (cur.wire !== 'anthropic') {
        const head = (text: string): string => text.slice(0, text.indexOf(`"${list}":`));
        assert.equal(head(cur.text), head(prev.text), `turn ${t + 1}: the bytes before ${list} changed`);
      }
    }
    for (const r of seen) assert.ok(!r.text.includes('x-anthropic-billing-header'), 'the billing block went upstream');
  }

  /** From turn 2 on, the cache reads at least 90 % of the previous turn's prompt. */
  function assertReads(seen: readonly CachingRequestSeen[]): void {
    for (let t = 1; t < seen.length; t++) {
      const prev = (seen[t - 1] as CachingRequestSeen).cache.prompt;
      const read = (seen[t] as CachingRequestSeen).cache.read;
      assert.ok(read >= prev * 0.9, `turn ${t + 1} read ${read} of the previous ${prev} prompt tokens`);
    }
  }

  const paths: readonly {
    name: string;
    path: string;
    body: (k: number, n: number) => Obj;
    headers?: Record<string, string>;
  }[] = [
    {
      name: 'anthropic → anthropic (native)',
      path: '/v1/anthropic/v1/messages',
      body: (k, n) => claudeCodeTurn(k, n, { model: 'c-anthropic' }),
    },
    {
      name: 'anthropic → anthropic (native, streamed: the fast path)',
      path: '/v1/anthropic/v1/messages',
      body: (k, n) => claudeCodeTurn(k, n, { model: 'c-anthropic', stream: true }),
    },
    {
      name: 'anthropic → chat',
      path: '/v1/anthropic/v1/messages',
      body: (k, n) => claudeCodeTurn(k, n, { model: 'c-openai', stream: true }),
    },
    {
      name: 'anthropic → responses',
      path: '/v1/anthropic/v1/messages',
      body: (k, n) => claudeCodeTurn(k, n, { model: 'c-responses' }),
    },
    {
      name: 'anthropic → gemini',
      path: '/v1/anthropic/v1/messages',
      body: (k, n) => claudeCodeTurn(k, n, { model: 'c-gemini', stream: true }),
    },
    {
      name: 'responses → chat',
      path: '/v1/openai/responses',
      body: (k) => codexTurn(k, { model: 'c-openai', stream: true, cacheKey: 'conv-1' }),
    },
    {
      name: 'responses → responses (native)',
      path: '/v1/openai/responses',
      body: (k) => codexTurn(k, { model: 'c-responses', stream: true }),
    },
    {
      name: 'responses → anthropic',
      path: '/v1/openai/responses',
      body: (k) => codexTurn(k, { model: 'c-anthropic' }),
    },
    { name: 'gemini → chat', path: '/v1/gemini/v1beta/models/c-openai:generateContent', body: (k) => geminiTurn(k) },
    {
      name: 'gemini → gemini (native)',
      path: '/v1/gemini/v1beta/models/c-gemini:generateContent',
      body: (k) => geminiTurn(k),
    },
    {
      name: 'chat → anthropic',
      path: '/v1/openai/chat/completions',
      body: (k) => chatTurn(k, { model: 'c-anthropic', stream: true }),
    },
    { name: 'chat → gemini', path: '/v1/openai/chat/completions', body: (k) => chatTurn(k, { model: 'c-gemini' }) },
    {
      name: 'chat → responses',
      path: '/v1/openai/chat/completions',
      body: (k) => chatTurn(k, { model: 'c-responses' }),
    },
  ];

  for (const p of paths)
    it(`${p.name}: each turn's upstream body starts with the last one's, no billing block, turn 2 on reads the cache`, async () => {
      const { key } = await svc.createFundedKey(10_000_000);
      for (let k = 1; k <= TURNS; k++) await post(p.path, key, p.body(k, k), p.headers);
      assertPrefixStable(up.requests);
      assertReads(up.requests);
    });

  // ---- the billing block ---------------------------------------------------------------------

  it('the billing block is removed and the rest of the system prompt kept byte for byte (native and translated)', async () => {
    const { key } = await svc.createFundedKey(10_000_000);
    const sent = claudeCodeTurn(1, 7, { model: 'c-anthropic' });
    await post('/v1/anthropic/v1/messages', key, sent);
    assert.deepEqual(up.requests[0]?.body['system'], (sent['system'] as Obj[]).slice(1));
    // A string system prompt whose first line is the block loses that line only.
    await post('/v1/anthropic/v1/messages', key, {
      ...sent,
      model: 'c-openai',
      system: 'x-anthropic-billing-header: cc_version=2.1.332.abc; cc_entrypoint=cli; cch=12345;\nYou are helpful.',
    });
    assert.deepEqual((up.requests[1]?.body['messages'] as Obj[])[0], { role: 'system', content: 'You are helpful.' });
  });

  it('anthropic.strip_billing_header: false keeps it', async () => {
    const kept = await startSvc({
      config: 'anthropic: { strip_billing_header: false }\nmodels:' + model('c-anthropic', 'anthropic'),
    });
    try {
      const { key } = await kept.createFundedKey(10_000_000);
      const res = await fetch(`${kept.baseUrl}/v1/anthropic/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify(claudeCodeTurn(1, 3, { model: 'c-anthropic' })),
      });
      assert.equal(res.status, 200, await res.text());
      assert.ok(up.requests[0]?.text.includes('x-anthropic-billing-header: cc_version'));
    } finally {
      await kept.close();
    }
  });

  // ---- cache routing keys --------------------------------------------------------------------

  it("prompt_cache_key: the client's goes on as it is; without one, the account's (a hash, one per account)", async () => {
    const a = await svc.createFundedKey(10_000_000, 'a');
    const b = await svc.createFundedKey(10_000_000, 'b');
    await post('/v1/openai/responses', a.key, codexTurn(1, { model: 'c-openai', cacheKey: 'conv-9', stream: false }));
    assert.equal(up.requests[0]?.body['prompt_cache_key'], 'conv-9');
    await post('/v1/openai/responses', a.key, {
      ...codexTurn(1, { model: 'c-responses' }),
      prompt_cache_retention: '24h',
      prompt_cache_key: 'conv-9',
    });
    assert.equal(up.requests[1]?.body['prompt_cache_key'], 'conv-9');
    assert.equal(up.requests[1]?.body['prompt_cache_retention'], '24h');
    await post('/v1/openai/chat/completions', a.key, chatTurn(1, { model: 'c-openai' }));
    await post('/v1/anthropic/v1/messages', a.key, claudeCodeTurn(1, 1, { model: 'c-responses' }));
    await post('/v1/openai/chat/completions', b.key, chatTurn(1, { model: 'c-openai' }));
    const [ka, ka2, kb] = [2, 3, 4].map((i) => up.requests[i]?.body['prompt_cache_key'] as string);
    assert.match(ka as string, /^svc-[A-Za-z0-9_-]{32}$/);
    assert.equal(ka2, ka, "one account's calls share their key");
    assert.notEqual(kb, ka, 'two accounts never share one');
    assert.ok(!(ka as string).includes(a.accountId));
    // Never to an upstream that does not take it.
    await post('/v1/openai/chat/completions', a.key, chatTurn(1, { model: 'c-anthropic' }));
    await post('/v1/openai/chat/completions', a.key, chatTurn(1, { model: 'c-gemini' }));
    assert.equal(up.requests[5]?.body['prompt_cache_key'], undefined);
    assert.equal(up.requests[6]?.body['prompt_cache_key'], undefined);
  });

  it('cache.key: session adds the client session id (Claude Code, Codex); off sends none', async () => {
    const { key } = await svc.createFundedKey(10_000_000);
    const cc = (id: string): Record<string, string> => ({ 'x-claude-code-session-id': id });
    await post('/v1/anthropic/v1/messages', key, claudeCodeTurn(1, 1, { model: 'c-session' }), cc('s-1'));
    await post('/v1/anthropic/v1/messages', key, claudeCodeTurn(2, 2, { model: 'c-session' }), cc('s-1'));
    await post('/v1/anthropic/v1/messages', key, claudeCodeTurn(1, 3, { model: 'c-session' }), cc('s-2'));
    await post('/v1/openai/responses', key, codexTurn(1, { model: 'c-session' }), { session_id: 's-2' });
    await post('/v1/openai/chat/completions', key, chatTurn(1, { model: 'c-nokey' }));
    const keys = up.requests.map((r) => r.body['prompt_cache_key']);
    assert.equal(keys[0], keys[1]);
    assert.notEqual(keys[2], keys[0]);
    assert.equal(keys[3], keys[2], "Codex's session_id names the same session");
    assert.equal(keys[4], undefined);
  });

  it('allowed_tools: unchanged in shape to a Responses upstream; the list narrowed for anthropic and gemini', async () => {
    const { key } = await svc.createFundedKey(10_000_000);
    const choice = {
      type: 'allowed_tools',
      allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'edit_file' } }] },
    };
    for (const m of ['c-responses', 'c-anthropic', 'c-gemini'])
      await post('/v1/openai/chat/completions', key, { ...chatTurn(1, { model: m }), tool_choice: choice });
    const [responses, anthropic, gemini] = up.requests.map((r) => r.body);
    assert.deepEqual(responses?.['tool_choice'], {
      type: 'allowed_tools',
      mode: 'auto',
      tools: [{ type: 'function', name: 'edit_file' }],
    });
    assert.equal((responses?.['tools'] as unknown[]).length, 3);
    assert.deepEqual(
      (anthropic?.['tools'] as Obj[]).map((t) => t['name']),
      ['edit_file'],
    );
    assert.deepEqual(anthropic?.['tool_choice'], { type: 'auto' });
    const declared = ((gemini?.['tools'] as Obj[])[0]?.['functionDeclarations'] as Obj[]).map((t) => t['name']);
    assert.deepEqual(declared, ['edit_file']);
  });

  // ---- breakpoints ---------------------------------------------------------------------------

  function markers(body: Obj): string[] {
    const out: string[] = [];
    (body['tools'] as Obj[] | undefined)?.forEach((t, i) => t['cache_control'] !== undefined && out.push(`tools.${i}`));
    (body['system'] as Obj[] | undefined)?.forEach(
      (b, i) => b['cache_control'] !== undefined && out.push(`system.${i}`),
    );
    (body['messages'] as Obj[]).forEach((m, i) =>
      (m['content'] as Obj[]).forEach((b, j) => b['cache_control'] !== undefined && out.push(`messages.${i}.${j}`)),
    );
    return out;
  }

  it('breakpoints onto an anthropic upstream from a wire without cache_control: tools, system, the last two user turns', async () => {
    const { key } = await svc.createFundedKey(10_000_000);
    await post('/v1/openai/chat/completions', key, chatTurn(3, { model: 'c-anthropic' }));
    await post('/v1/openai/chat/completions', key, chatTurn(3, { model: 'c-nobreak' }));
    const [auto, off] = up.requests.map((r) => r.body);
    assert.deepEqual(markers(auto as Obj), ['tools.2', 'system.0', 'messages.2.0', 'messages.4.0']);
    for (const m of markers(auto as Obj)) assert.ok(m !== '');
    assert.deepEqual(markers(off as Obj), []);
  });

  it("native Anthropic requests keep the client's own cache_control, ttl included", async () => {
    const { key } = await svc.createFundedKey(10_000_000);
    const body = claudeCodeTurn(2, 1, { model: 'c-anthropic', billing: false });
    (body['system'] as Obj[])[0] = {
      type: 'text',
      text: 'x'.repeat(6000),
      cache_control: { type: 'ephemeral', ttl: '1h' },
    };
    await post('/v1/anthropic/v1/messages', key, body);
    const sent = up.requests[0]?.body as Obj;
    assert.deepEqual(sent['system'], body['system']);
    assert.deepEqual(sent['messages'], body['messages']);
    assert.deepEqual(sent['tools'], body['tools']);
    assert.ok((up.requests[0]?.cache.write1h ?? 0) > 0, 'the fake wrote the 1h tier');
  });
});
