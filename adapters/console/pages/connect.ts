import { html, type Html } from '../html';
import { page, type Viewer } from '../layout';

function snippet(id: string, code: string): Html {
  return html`<div class="snippet">
    <pre><code id="${id}">${code}</code></pre>
    <button class="btn btn-quiet btn-small" type="button" data-copy="${id}" hidden>Copy</button>
  </div>`;
}

function card(title: string, where: string, id: string, code: string, after?: Html): Html {
  return html`<section class="panel" aria-labelledby="${id}-h">
    <h2 id="${id}-h">${title} <small>${where}</small></h2>
    ${snippet(id, code)}${after ?? html``}
  </section>`;
}

/**
 * Ready-to-paste settings for the OpenAI SDKs, Gemini CLI and the MCP clients, with this deployment's base
 * URL. The key stays in an environment variable: none of these files should hold it.
 */
export function connectPage(input: { viewer: Viewer; origin: string; model: string }): Html {
  let counter = 0;
  const openai = `${input.origin}/v1/openai`;
  const mcp = `${input.origin}/v1/mcp`;
  const gemini = `${input.origin}/v1/gemini`;
  const model = input.model;
  const next = (): string => `snippet-${++counter}`;
  const cards = [
    card(
      'Your base URLs',
      '',
      next(),
      `OpenAI-compatible API: ${openai}\nGemini-compatible API: ${gemini}\nMCP server:            ${mcp}\n\nexport SVC_API_KEY=svc_sk_…   # a key from the API keys page`,
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
      'Claude Code',
      'MCP tools, one command',
      next(),
      `claude mcp add --transport http svc ${mcp} --header "Authorization: Bearer $SVC_API_KEY"`,
    ),
    card(
      'Cursor',
      '~/.cursor/mcp.json or .cursor/mcp.json',
      next(),
      `{
  "mcpServers": {
    "svc": {
      "url": "${mcp}",
      "headers": { "Authorization": "Bearer \${env:SVC_API_KEY}" }
    }
  }
}`,
    ),
    card(
      'VS Code',
      '.vscode/mcp.json (asks for the key once)',
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
      'Codex',
      '~/.codex/config.toml',
      next(),
      `[mcp_servers.svc]
url = "${mcp}"
bearer_token_env_var = "SVC_API_KEY"`,
    ),
    card(
      'Gemini CLI',
      'svc models and MCP tools: two variables and ~/.gemini/settings.json',
      next(),
      `export GOOGLE_GEMINI_BASE_URL=${gemini}
export GEMINI_API_KEY=$SVC_API_KEY

# ~/.gemini/settings.json
{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "model": { "name": "${model}" },
  "mcpServers": {
    "svc": {
      "httpUrl": "${mcp}",
      "headers": { "Authorization": "Bearer $SVC_API_KEY" }
    }
  }
}`,
    ),
  ];
  return page({
    title: 'Connect',
    path: '/console/connect',
    viewer: input.viewer,
    lede: 'Point your SDK or coding assistant at svc. Keep the key in the SVC_API_KEY environment variable, not in files you commit.',
    body: html`<div class="tabs">${cards}</div>`,
  });
}
