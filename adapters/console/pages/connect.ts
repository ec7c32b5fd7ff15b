import type { Context } from 'koa';
import { origin, send, signedOf } from '../context';
import { html, type Html } from '../html';
import { t, type Locale } from '../i18n';
import { page, type Viewer } from '../layout';

// Code, keys and addresses stay left to right on a Persian page (dir="ltr" on the snippet and its pre,
// which the code inherits), with the copy button on the right where the padding leaves it room.
function snippet(l: Locale, id: string, code: string): Html {
  return html`<div class="snippet" dir="ltr">
    <pre tabindex="0" dir="ltr"><code id="${id}">${code}</code></pre>
    <button class="btn btn-quiet btn-small" type="button" data-copy="${id}" data-copied="${l === 'fa' ? 'کپی شد' : 'Copied'}" hidden>${t(l, 'connect.copy')}</button>
  </div>`;
}

/**
 * Ready-to-paste settings for the SDKs and coding assistants, with this deployment's base URLs:
 * svc as their model provider (OpenAI, Anthropic and Gemini APIs) and as their MCP server. The
 * key stays in an environment variable: none of these files should hold it.
 */
/** What every card of the connect page is made with. */
interface CardContext {
  readonly l: Locale;
  readonly card: (title: string, where: string, id: string, code: string, after?: Html) => Html;
  readonly next: () => string;
  readonly openai: string;
  readonly anthropic: string;
  readonly gemini: string;
  readonly mcp: string;
  readonly model: string;
}

/** The connect page's first cards: the base URLs, curl and the SDKs. */
function apiCards(c: CardContext): Html[] {
  const { l, card, next, openai, anthropic, gemini, mcp, model } = c;
  return [
    card(
      t(l, 'connect.baseUrls'),
      '',
      next(),
      `OpenAI-compatible API:    ${openai}
Anthropic-compatible API: ${anthropic}
Gemini-compatible API:    ${gemini}
MCP server (tools):       ${mcp}

export SVC_API_KEY=svc_sk_…   # a key from the API keys page`,
    ),
    card(
      'curl',
      t(l, 'connect.anyShell'),
      next(),
      `curl ${openai}/chat/completions \\
  -H "Authorization: Bearer $SVC_API_KEY" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "${model}", "messages": [{"role": "user", "content": "Hello!"}]}'`,
    ),
    card(
      'OpenAI SDK for Node',
      'npm install openai',
      next(),
      `import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: '${openai}',
  apiKey: process.env.SVC_API_KEY,
});

const completion = await client.chat.completions.create({
  model: '${model}',
  messages: [{ role: 'user', content: 'Hello!' }],
});
console.log(completion.choices[0].message.content);`,
    ),
    card(
      'OpenAI SDK for Python',
      'pip install openai',
      next(),
      `import os
from openai import OpenAI

client = OpenAI(base_url="${openai}", api_key=os.environ["SVC_API_KEY"])

completion = client.chat.completions.create(
    model="${model}",
    messages=[{"role": "user", "content": "Hello!"}],
)
print(completion.choices[0].message.content)`,
    ),
    card(
      'Codex',
      t(l, 'connect.codex'),
      next(),
      `model = "${model}"
model_provider = "svc"

[model_providers.svc]
name = "svc"
base_url = "${openai}"
env_key = "SVC_API_KEY"
wire_api = "responses"
model_catalog_url = "${openai}/models"

[mcp_servers.svc]
url = "${mcp}"
bearer_token_env_var = "SVC_API_KEY"`,
    ),
  ];
}

/** The connect page's other cards: the coding agents and editors. */
function toolCards(c: CardContext): Html[] {
  const { l, card, next, openai, anthropic, gemini, mcp, model } = c;
  return [
    card(
      'Claude Code',
      t(l, 'connect.claude'),
      next(),
      `export ANTHROPIC_BASE_URL=${anthropic}
export ANTHROPIC_API_KEY=$SVC_API_KEY
export ANTHROPIC_MODEL=${model} ANTHROPIC_SMALL_FAST_MODEL=${model} \\
  ANTHROPIC_DEFAULT_HAIKU_MODEL=${model} ANTHROPIC_DEFAULT_SONNET_MODEL=${model} ANTHROPIC_DEFAULT_OPUS_MODEL=${model}
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1

# svc's tools: add the MCP server
claude mcp add --transport http -s user svc ${mcp} --header "Authorization: Bearer $SVC_API_KEY"

# allow svc's tools up front (claude -p cannot ask; without this every call is blocked), or
# put the same names in ~/.claude/settings.json: { "permissions": { "allow": [ … ] } }
claude --model ${model} --allowedTools "${CLAUDE_TOOLS}"`,
    ),
    card(
      'Cursor',
      t(l, 'connect.cursor'),
      next(),
      `{
  "mcpServers": {
    "svc": {
      "url": "${mcp}",
      "headers": { "Authorization": "Bearer \${env:SVC_API_KEY}" }
    }
  }
}`,
      html`<p class="hint">
        ${t(l, 'connect.cursorModels')} <code>${openai}</code>${l === 'fa' ? '؛' : ','} ${t(l, 'connect.cursorModel')}
        <code>${model}</code>.
      </p>`,
    ),
    card(
      'VS Code',
      t(l, 'connect.vscode'),
      next(),
      `{
  "inputs": [{ "type": "promptString", "id": "svc-key", "description": "svc API key (svc_sk_…)", "password": true }],
  "servers": {
    "svc": {
      "type": "http",
      "url": "${mcp}",
      "headers": { "Authorization": "Bearer \${input:svc-key}" }
    }
  }
}`,
    ),
    card(
      'Gemini CLI',
      t(l, 'connect.gemini'),
      next(),
      `export GOOGLE_GEMINI_BASE_URL=${gemini}
export GEMINI_API_KEY=$SVC_API_KEY

# in a script (gemini -p …) add --skip-trust, or trust the folder in an interactive run first
gemini -m ${model}`,
      html`<p class="hint">${t(l, 'connect.geminiSettings')}</p>
        ${snippet(l, next(), `{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "model": { "name": "${model}" },
  "mcpServers": {
    "svc": {
      "httpUrl": "${mcp}",
      "headers": { "Authorization": "Bearer $SVC_API_KEY" },
      "trust": true
    }
  }
}`)}`,
    ),
  ];
}

/**
 * Claude Code's permission names of svc's tools (`mcp__SERVER__TOOL`, the server added as svc).
 * Without them `claude -p` blocks every call ("you haven't granted it yet").
 */
const CLAUDE_TOOLS = ['web_search', 'maps_search_places', 'shopping_search'].map((t) => `mcp__svc__${t}`).join(' ');

export function connectPage(input: { viewer: Viewer; origin: string; model: string }): Html {
  const l = input.viewer.locale;
  const card = (title: string, where: string, id: string, code: string, after?: Html): Html =>
    html`<section class="panel" aria-labelledby="${id}-h">
      <h2 id="${id}-h"><span dir="auto">${title}</span> <small dir="auto">${where}</small></h2>
      ${snippet(l, id, code)}${after ?? html``}
    </section>`;
  let counter = 0;
  const openai = `${input.origin}/v1/openai`;
  const anthropic = `${input.origin}/v1/anthropic`;
  const gemini = `${input.origin}/v1/gemini`;
  const mcp = `${input.origin}/v1/mcp`;
  const model = input.model;
  const next = (): string => `snippet-${++counter}`;
  const c: CardContext = { l, card, next, openai, anthropic, gemini, mcp, model };
  const cards = [...apiCards(c), ...toolCards(c)];
  return page({
    title: t(l, 'connect.title'),
    path: '/console/connect',
    viewer: input.viewer,
    lede: t(l, 'connect.lede'),
    body: html`<div class="tabs">${cards}</div>`,
  });
}

// ---- the page (routed in ../app.ts) ----

/** GET /console/connect: the snippets with this deployment's address and the first model. */
export async function showConnect(ctx: Context): Promise<void> {
  const s = signedOf(ctx);
  send(ctx, 200, connectPage({ viewer: s.viewer, origin: origin(ctx), model: s.modelIds[0] ?? 'svc-pro' }));
}
