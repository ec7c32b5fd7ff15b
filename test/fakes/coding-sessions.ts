/*
 * Coding-assistant-shaped conversations for the cache tests and the bench's `cache` scenario
 * (issue 42): a Claude-Code-shaped Messages session (a billing block first in the system prompt,
 * its `cch=` changing with every request; a long system prompt and tools with `cache_control`;
 * a breakpoint on the last user turn) and a Codex-shaped Responses session (instructions, tools,
 * `prompt_cache_key`), plus the same conversation in OpenAI chat and Gemini's shape. Turn `k`
 * (from 1) holds k user turns; each earlier answer is the caching fake's `ok`.
 */

type Obj = Record<string, unknown>;

const filler = (label: string, bytes: number): string => {
  let out = '';
  for (let i = 0; out.length < bytes; i++)
    out += `${label} rule ${i}: keep edits small, run the tests, explain the change. `;
  return out.slice(0, bytes);
};

/** The long system prompt every session carries (about 1,500 tokens at 4 bytes a token). */
export const SYSTEM_PROMPT = `You are a coding assistant working in the user's repository.\n${filler('system', 6000)}`;

const schema = (name: string): Obj => ({
  type: 'object',
  properties: { [name]: { type: 'string', description: filler(`${name} argument`, 300) } },
  required: [name],
});

/** Tools as (name, description, JSON schema), about 1,000 tokens together. */
export const TOOLS: readonly { name: string; description: string; parameters: Obj }[] = [
  { name: 'read_file', description: filler('read_file', 900), parameters: schema('path') },
  { name: 'edit_file', description: filler('edit_file', 900), parameters: schema('patch') },
  { name: 'run_shell', description: filler('run_shell', 900), parameters: schema('command') },
];

/** The user's k-th message (k from 1): different every turn, a few hundred bytes. */
export function userText(k: number): string {
  return `Turn ${k}: ${filler(`please look at module ${k}`, 400)}`;
}

/** Claude Code's billing block, its `cch=` different for every request `n`. */
export function billingBlock(n: number): string {
  return `x-anthropic-billing-header: cc_version=2.1.332.a${(n % 16).toString(16)}f; cc_entrypoint=sdk-cli; cch=${(0x1a2b3 + n * 7919).toString(16).slice(-5)};`;
}

/** The answer the caching fake gives every turn. */
export const ANSWER = 'ok';

/** Turn k of a Claude-Code-shaped session (request number `n`, for the rotating billing block). */
export function claudeCodeTurn(
  k: number,
  n: number,
  options: { model: string; stream?: boolean; billing?: boolean },
): Obj {
  const messages: Obj[] = [];
  for (let i = 1; i <= k; i++) {
    const last = i === k;
    messages.push({
      role: 'user',
      content: [{ type: 'text', text: userText(i), ...(last ? { cache_control: { type: 'ephemeral' } } : {}) }],
    });
    if (!last) messages.push({ role: 'assistant', content: [{ type: 'text', text: ANSWER }] });
  }
  return {
    model: options.model,
    max_tokens: 1000,
    ...(options.stream === true ? { stream: true } : {}),
    system: [
      ...(options.billing === false ? [] : [{ type: 'text', text: billingBlock(n) }]),
      { type: 'text', text: SYSTEM_PROMPT, cache_control: { type: 'ephemeral' } },
    ],
    tools: TOOLS.map((t, i) => ({
      name: t.name,
      description: t.description,
      input_schema: t.parameters,
      ...(i === TOOLS.length - 1 ? { cache_control: { type: 'ephemeral' } } : {}),
    })),
    messages,
  };
}

/** Turn k of a Codex-shaped Responses session (its conversation id as `prompt_cache_key`). */
export function codexTurn(k: number, options: { model: string; stream?: boolean; cacheKey?: string }): Obj {
  const input: Obj[] = [];
  for (let i = 1; i <= k; i++) {
    input.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: userText(i) }] });
    if (i < k) input.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: ANSWER }] });
  }
  return {
    model: options.model,
    instructions: SYSTEM_PROMPT,
    input,
    tools: TOOLS.map((t) => ({
      type: 'function',
      name: t.name,
      description: t.description,
      parameters: t.parameters,
      strict: false,
    })),
    tool_choice: 'auto',
    parallel_tool_calls: false,
    store: false,
    ...(options.stream === true ? { stream: true } : {}),
    ...(options.cacheKey === undefined ? {} : { prompt_cache_key: options.cacheKey }),
  };
}

/** Turn k in OpenAI chat's shape. */
export function chatTurn(k: number, options: { model: string; stream?: boolean }): Obj {
  const messages: Obj[] = [{ role: 'system', content: SYSTEM_PROMPT }];
  for (let i = 1; i <= k; i++) {
    messages.push({ role: 'user', content: userText(i) });
    if (i < k) messages.push({ role: 'assistant', content: ANSWER });
  }
  return {
    model: options.model,
    messages,
    tools: TOOLS.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    })),
    ...(options.stream === true ? { stream: true, stream_options: { include_usage: true } } : {}),
  };
}

/** Turn k in Gemini's shape (the model goes in the URL). */
export function geminiTurn(k: number): Obj {
  const contents: Obj[] = [];
  for (let i = 1; i <= k; i++) {
    contents.push({ role: 'user', parts: [{ text: userText(i) }] });
    if (i < k) contents.push({ role: 'model', parts: [{ text: ANSWER }] });
  }
  return {
    systemInstruction: { parts: [{ text: SYSTEM_PROMPT }] },
    tools: [
      {
        functionDeclarations: TOOLS.map((t) => ({
          name: t.name,
          description: t.description,
          parameters: t.parameters,
        })),
      },
    ],
    contents,
  };
}
