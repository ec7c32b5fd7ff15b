import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser } from './helpers';

function unescape(text: string): string {
  return text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

describe('console: the connect page, complete and with this deployment’s base URLs', function () {
  this.timeout(60_000);
  let svc: TestSvc;

  before(async function () {
    svc = await startSvc();
  });

  after(async function () {
    await svc?.close();
  });

  it('gives every client its settings: JSON files parse; Codex has model_providers.svc and mcp_servers.svc; Claude Code and Gemini CLI point at svc', async function () {
    const user = await createConsoleUser(svc, { name: 'C', email: 'c@example.com', balance: 0n, keyName: 'k' });
    const c = consoleClient(svc.baseUrl);
    await c.signIn(user.email, user.password);
    const page = await c.get('/connect');
    assert.equal(page.status, 200);
    const snippets = [...page.body.matchAll(/<code id="snippet-\d+">([\s\S]*?)<\/code>/g)].map((m) => unescape(m[1] ?? ''));
    const base = svc.baseUrl;
    const find = (needle: string): string => snippets.find((s) => s.includes(needle)) ?? '';

    assert.match(find('curl'), new RegExp(`curl ${base}/v1/openai/chat/completions`));
    const codex = find('[model_providers.svc]');
    assert.match(codex, /model_provider = "svc"/);
    assert.ok(codex.includes(`base_url = "${base}/v1/openai"`));
    assert.match(codex, /wire_api = "responses"/);
    assert.ok(codex.includes(`model_catalog_url = "${base}/v1/openai/models"`), 'Codex reads the model catalog');
    assert.ok(codex.includes(`[mcp_servers.svc]\nurl = "${base}/v1/mcp"`));
    const claude = find('ANTHROPIC_BASE_URL');
    assert.ok(claude.includes(`export ANTHROPIC_BASE_URL=${base}/v1/anthropic\n`));
    assert.ok(claude.includes(`claude mcp add --transport http -s user svc ${base}/v1/mcp`));
    const gemini = find('GOOGLE_GEMINI_BASE_URL');
    assert.ok(gemini.includes(`export GOOGLE_GEMINI_BASE_URL=${base}/v1/gemini\nexport GEMINI_API_KEY=$SVC_API_KEY`));
    assert.ok(page.body.includes(`<code>${base}/v1/openai</code>`), 'Cursor’s base URL override');
    for (const s of snippets.filter((x) => x.trimStart().startsWith('{'))) {
      const parsed = JSON.parse(s) as Record<string, Record<string, { url?: string; httpUrl?: string }>>;
      const server = parsed['mcpServers']?.['svc'] ?? parsed['servers']?.['svc'];
      assert.equal(server?.url ?? server?.httpUrl, `${base}/v1/mcp`);
    }
    assert.equal(snippets.filter((x) => x.trimStart().startsWith('{')).length, 3, 'Cursor, VS Code, Gemini CLI');
    // Issue 33: claude -p blocks an MCP tool it was not allowed, and Gemini CLI offers no tool of
    // an untrusted server in a non-interactive run.
    assert.match(
      claude,
      /--allowedTools "mcp__svc__web_search mcp__svc__maps_search_places mcp__svc__shopping_search"/,
    );
    const geminiSettings = snippets.find((x) => x.includes('"httpUrl"')) ?? '{}';
    const trusted = JSON.parse(geminiSettings) as { mcpServers: { svc: { trust?: unknown } } };
    assert.equal(trusted.mcpServers.svc.trust, true);
  });
});
