import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { closest } from '../../core/text/suggest';
import { startSvc, type TestSvc } from '../helpers/harness';
import { connectClient } from '../mcp/helpers';

describe('"did you mean" for a mistyped model or tool, on every wire', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let key: string;

  before(async () => {
    svc = await startSvc();
    key = (await svc.createFundedKey(100_000)).key;
  });

  after(async () => {
    await svc?.close();
  });

  it('suggests the near name, a namespaced one, another case, and nothing for an unrelated name', () => {
    const names = ['svc-pro', 'svc-embed', 'web_search', 'maps_search_places'];
    assert.equal(closest('svc-pr', names), 'svc-pro');
    assert.equal(closest('SVC-PRO', names), 'svc-pro');
    assert.equal(closest('svc-emebd', names), 'svc-embed');
    assert.equal(closest('mcp__svc__maps_search_places', names), 'maps_search_places');
    assert.equal(closest('mcp_svc_web_search', names), 'web_search');
    assert.equal(closest('gpt-4o', names), undefined);
    assert.equal(closest('', names), undefined);
  });

  it('OpenAI chat and Responses: 404 model_not_found that names the model it meant', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${svc.baseUrl}/v1/openai`, maxRetries: 0 });
    for (const call of [
      () => client.chat.completions.create({ model: 'svc-pr', messages: [{ role: 'user', content: 'hi' }] }),
      () => client.responses.create({ model: 'svc-pr', input: 'hi' }),
    ]) {
      const error = await call().then(
        () => assert.fail('expected a 404'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof OpenAI.NotFoundError);
      assert.equal(error.code, 'model_not_found');
      assert.match(
        error.message,
        /The model 'svc-pr' does not exist or you do not have access to it\. Did you mean 'svc-pro'\?/,
      );
    }
    const far = await client.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    assert.ok(far instanceof OpenAI.NotFoundError);
    assert.doesNotMatch(far.message, /Did you mean/);
  });

  it('Anthropic Messages and Gemini: the same hint in their own error bodies', async () => {
    const anthropic = await fetch(`${svc.baseUrl}/v1/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-por', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(anthropic.status, 404);
    const a = (await anthropic.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(a.type, 'error');
    assert.equal(a.error.type, 'not_found_error');
    assert.match(a.error.message, /Did you mean 'svc-pro'\?/);

    const gemini = await fetch(`${svc.baseUrl}/v1/gemini/v1beta/models/svc-pr:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    assert.equal(gemini.status, 404);
    const g = (await gemini.json()) as { error: { status: string; message: string } };
    assert.equal(g.error.status, 'NOT_FOUND');
    assert.match(g.error.message, /Did you mean 'svc-pro'\?/);
  });

  it("MCP: an unknown tool (a client's prefixed name) names the tool it meant", async () => {
    const client = await connectClient(svc.baseUrl, key);
    try {
      const error = await client.callTool({ name: 'mcp__svc__maps_search_places', arguments: { query: 'cafe' } }).then(
        (result) => result,
        (e: unknown) => e,
      );
      const text = error instanceof Error ? error.message : JSON.stringify(error);
      assert.match(text, /Unknown tool "mcp__svc__maps_search_places"/);
      assert.match(text, /Did you mean "maps_search_places"\?/);
    } finally {
      await client.close();
    }
  });
});
