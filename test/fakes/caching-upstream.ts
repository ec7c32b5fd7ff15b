import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A fake of every upstream kind that caches prompts as its provider documents
 * (../shared/ref/clients/caching.md §1), for the cache tests and the bench's `cache` scenario. One
 * HTTP server on 127.0.0.1:0 answers four wires, each with a cache of its own:
 *
 * - Anthropic Messages (`POST /v1/messages`): explicit breakpoints. The prompt is its blocks in
 *   render order (tools, system, then each message's content blocks); a block with
 *   `cache_control` (at most 4) marks a breakpoint, `ttl` "5m" (default) or "1h". At each
 *   breakpoint the longest cached prefix that ends on a block boundary at most 20 blocks before
 *   it is read; what lies between that and the last breakpoint is written (tokens up to the last
 *   1h breakpoint to the 1-hour tier, the rest to the 5-minute tier). A prefix below 1,024 tokens
 *   is not cached. The markers are not part of the content: a breakpoint that moves keeps the
 *   prefix. Usage: `input_tokens` (after the read and the write), `cache_read_input_tokens`,
 *   `cache_creation_input_tokens`, `cache_creation.{ephemeral_5m_input_tokens,
 *   ephemeral_1h_input_tokens}`.
 * - OpenAI chat completions (`POST /v1/chat/completions`) and Responses (`POST /v1/responses`):
 *   automatic prefix caching per `prompt_cache_key` (no key: one shared bucket): the longest
 *   common prefix, in bytes, of this prompt with every earlier one in the bucket, in tokens,
 *   rounded down to 128-token steps, nothing under 1,024. Usage: `prompt_tokens_details.
 *   cached_tokens` / `input_tokens_details.cached_tokens`.
 * - Gemini (`POST /v1beta/models/M:generateContent` and `:streamGenerateContent?alt=sse`):
 *   implicit caching on the longest repeated prefix of 1,024 tokens or more. Usage:
 *   `usageMetadata.cachedContentTokenCount`.
 *
 * A token is 4 bytes of the prompt's JSON (the fake needs a count, not a tokenizer). The prompt is
 * what the model sees, in the order it sees it: sampling fields, `stream`, limits, the cache key
 * and metadata are not part of it. Every request's body is kept (`requests`) for assertions. Each
 * answer is the text `ok` (2 output tokens), streamed or not as asked, unless a tool call was
 * queued (`callTool`): the next request that offers a tool whose name contains the queued name
 * gets a call of that tool in its wire's shape instead (still 2 output tokens). Time plays no
 * part: entries never expire (a session's turns follow each other within minutes).
 */

export type CachingWire = 'anthropic' | 'openai' | 'openai-responses' | 'gemini';

export interface CachingRequestSeen {
  readonly wire: CachingWire;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  /** The body as it came (its bytes, for byte-stability checks). */
  readonly text: string;
  readonly body: Record<string, unknown>;
  /** What the cache did: prompt tokens in all, read, written (5m and 1h). */
  readonly cache: CacheOutcome;
}

export interface CacheOutcome {
  readonly prompt: number;
  readonly read: number;
  readonly write5m: number;
  readonly write1h: number;
}

export interface FakeCachingUpstream {
  /** http://127.0.0.1:PORT (Anthropic's base URL; OpenAI's is `${baseUrl}/v1`, Gemini's `${baseUrl}/v1beta`). */
  readonly baseUrl: string;
  readonly requests: CachingRequestSeen[];
  /**
   * Queues a tool call: the next request offering a tool whose name contains `name` (an MCP
   * client prefixes its servers' tools) is answered with a call of that tool with `args`.
   */
  callTool(name: string, args: Record<string, unknown>): void;
  /** Forgets every cache entry, queued call and request. */
  reset(): void;
  close(): Promise<void>;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Prompt tokens of `bytes` bytes of prompt. */
const tokensOf = (bytes: number): number => Math.ceil(bytes / 4);
const MIN_CACHED = 1024;
const ANSWER = 'ok';
/** Output tokens of every answer (text or tool call). */
export const CACHING_OUTPUT_TOKENS = 2;
const OUTPUT_TOKENS = CACHING_OUTPUT_TOKENS;

/** A tool call an answer makes instead of its text: the offered tool's full name, its arguments. */
interface ToolCall {
  readonly name: string;
  readonly args: Record<string, unknown>;
  readonly id: string;
}

/** The names of the tools a request offers, in its wire's shape. */
export function offeredTools(wire: CachingWire, body: Obj): string[] {
  const tools = Array.isArray(body['tools']) ? body['tools'] : [];
  const names: string[] = [];
  for (const tool of tools) {
    if (!isObj(tool)) continue;
    if (wire === 'openai' && isObj(tool['function'])) names.push(String(tool['function']['name']));
    else if (wire === 'gemini' && Array.isArray(tool['functionDeclarations'])) {
      for (const f of tool['functionDeclarations']) if (isObj(f)) names.push(String(f['name']));
    } else if (typeof tool['name'] === 'string') names.push(tool['name']);
  }
  return names;
}

// ---- Anthropic -------------------------------------------------------------------------------

interface Block {
  readonly text: string;
  readonly ttl?: '5m' | '1h';
}

function withoutMarker(block: unknown): { content: unknown; ttl?: '5m' | '1h' } {
  if (!isObj(block) || block['cache_control'] === undefined) return { content: block };
  const { cache_control: control, ...rest } = block;
  const ttl = isObj(control) && control['ttl'] === '1h' ? '1h' : '5m';
  return { content: rest, ttl };
}

/** The Messages prompt as blocks in render order (tools, system, messages), markers apart. */
function anthropicBlocks(body: Obj): Block[] {
  const out: Block[] = [];
  const push = (prefix: string, block: unknown): void => {
    const { content, ttl } = withoutMarker(block);
    out.push({ text: prefix + JSON.stringify(content), ...(ttl === undefined ? {} : { ttl }) });
  };
  for (const tool of Array.isArray(body['tools']) ? body['tools'] : []) push('tool:', tool);
  const system = body['system'];
  if (typeof system === 'string') push('system:', { type: 'text', text: system });
  else if (Array.isArray(system)) for (const block of system) push('system:', block);
  for (const message of Array.isArray(body['messages']) ? body['messages'] : []) {
    if (!isObj(message)) continue;
    const role = String(message['role']);
    const content = message['content'];
    if (typeof content === 'string') push(`${role}:`, { type: 'text', text: content });
    else if (Array.isArray(content)) for (const block of content) push(`${role}:`, block);
  }
  return out;
}

function anthropicCache(cache: Map<string, '5m' | '1h'>, body: Obj): CacheOutcome {
  const blocks = anthropicBlocks(body);
  // Cumulative bytes and prefix hashes at each block boundary (i: after block i).
  const ends: number[] = [];
  const hashes: string[] = [];
  let bytes = 0;
  const running = createHash('sha256');
  for (const block of blocks) {
    bytes += Buffer.byteLength(block.text, 'utf8');
    running.update(block.text).update('\0');
    ends.push(bytes);
    hashes.push(running.copy().digest('hex'));
  }
  const prompt = tokensOf(bytes);
  const breakpoints = blocks.flatMap((b, i) => (b.ttl === undefined ? [] : [i])).slice(0, 4);
  let readEnd = -1;
  for (const point of breakpoints)
    for (let i = point; i >= 0 && i >= point - 20; i--)
      if (cache.has(hashes[i] as string) && i > readEnd) {
        readEnd = i;
        break;
      }
  const read = readEnd < 0 ? 0 : tokensOf(ends[readEnd] as number);
  let write5m = 0;
  let write1h = 0;
  let written = read;
  for (const point of breakpoints) {
    const at = tokensOf(ends[point] as number);
    if (point <= readEnd || at < MIN_CACHED) continue;
    const ttl = blocks[point]?.ttl ?? '5m';
    if (ttl === '1h') write1h += at - written;
    else write5m += at - written;
    written = at;
    cache.set(hashes[point] as string, ttl);
  }
  return { prompt, read, write5m, write1h };
}

function anthropicUsage(outcome: CacheOutcome): Obj {
  return {
    input_tokens: outcome.prompt - outcome.read - outcome.write5m - outcome.write1h,
    cache_creation_input_tokens: outcome.write5m + outcome.write1h,
    cache_read_input_tokens: outcome.read,
    cache_creation: { ephemeral_5m_input_tokens: outcome.write5m, ephemeral_1h_input_tokens: outcome.write1h },
    output_tokens: OUTPUT_TOKENS,
  };
}

// ---- prefix caches (OpenAI, Gemini) ----------------------------------------------------------

/** The longest common prefix of `text` with any of `seen`, in bytes. */
function longestPrefix(text: string, seen: readonly string[]): number {
  let best = 0;
  for (const earlier of seen) {
    const n = Math.min(text.length, earlier.length);
    let i = 0;
    while (i < n && text.charCodeAt(i) === earlier.charCodeAt(i)) i++;
    if (i > best) best = i;
  }
  return Buffer.byteLength(text.slice(0, best), 'utf8');
}

function prefixCache(bucket: string[], prompt: string, step: number): CacheOutcome {
  const total = tokensOf(Buffer.byteLength(prompt, 'utf8'));
  let read = Math.floor(longestPrefix(prompt, bucket) / 4);
  read = read < MIN_CACHED ? 0 : step > 1 ? Math.floor(read / step) * step : read;
  bucket.push(prompt);
  return { prompt: total, read: Math.min(read, total), write5m: 0, write1h: 0 };
}

/** A chat completions prompt: tools, then each message, in order. */
function chatPrompt(body: Obj): string {
  const parts = [JSON.stringify(body['tools'] ?? [])];
  for (const message of Array.isArray(body['messages']) ? body['messages'] : []) parts.push(JSON.stringify(message));
  return parts.join('\n');
}

/** A Responses prompt: tools, instructions, then each input item, in order. */
function responsesPrompt(body: Obj): string {
  const parts = [JSON.stringify(body['tools'] ?? []), JSON.stringify(body['instructions'] ?? null)];
  const input = body['input'];
  if (typeof input === 'string') parts.push(JSON.stringify(input));
  else if (Array.isArray(input)) for (const item of input) parts.push(JSON.stringify(item));
  return parts.join('\n');
}

/** A Gemini prompt: system instruction, tools, then each content, in order. */
function geminiPrompt(body: Obj): string {
  const parts = [JSON.stringify(body['systemInstruction'] ?? null), JSON.stringify(body['tools'] ?? [])];
  for (const content of Array.isArray(body['contents']) ? body['contents'] : []) parts.push(JSON.stringify(content));
  return parts.join('\n');
}

// ---- answers ---------------------------------------------------------------------------------

function sse(res: http.ServerResponse, events: readonly (readonly [string | undefined, Obj])[], done = false): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const [name, data] of events)
    res.write(`${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`);
  if (done) res.write('data: [DONE]\n\n');
  res.end();
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function answerAnthropic(res: http.ServerResponse, body: Obj, outcome: CacheOutcome, n: number, call?: ToolCall): void {
  const usage = anthropicUsage(outcome);
  const stop = call === undefined ? 'end_turn' : 'tool_use';
  const id = `msg_cache_${n}`;
  const model = String(body['model']);
  if (body['stream'] !== true) {
    json(res, 200, {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [
        call === undefined
          ? { type: 'text', text: ANSWER }
          : { type: 'tool_use', id: call.id, name: call.name, input: call.args },
      ],
      stop_reason: stop,
      stop_sequence: null,
      usage,
    });
    return;
  }
  sse(res, [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usage, output_tokens: 1 },
        },
      },
    ],
    [
      'content_block_start',
      {
        type: 'content_block_start',
        index: 0,
        content_block:
          call === undefined
            ? { type: 'text', text: '' }
            : { type: 'tool_use', id: call.id, name: call.name, input: {} },
      },
    ],
    [
      'content_block_delta',
      {
        type: 'content_block_delta',
        index: 0,
        delta:
          call === undefined
            ? { type: 'text_delta', text: ANSWER }
            : { type: 'input_json_delta', partial_json: JSON.stringify(call.args) },
      },
    ],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    [
      'message_delta',
      {
        type: 'message_delta',
        delta: { stop_reason: stop, stop_sequence: null },
        usage: { output_tokens: OUTPUT_TOKENS },
      },
    ],
    ['message_stop', { type: 'message_stop' }],
  ]);
}

function answerChat(res: http.ServerResponse, body: Obj, outcome: CacheOutcome, n: number, call?: ToolCall): void {
  const finish = call === undefined ? 'stop' : 'tool_calls';
  const toolCall = (args: string): Obj =>
    call === undefined ? {} : { id: call.id, type: 'function', function: { name: call.name, arguments: args } };
  const usage = {
    prompt_tokens: outcome.prompt,
    completion_tokens: OUTPUT_TOKENS,
    total_tokens: outcome.prompt + OUTPUT_TOKENS,
    prompt_tokens_details: { cached_tokens: outcome.read, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
  const base = { id: `chatcmpl-cache-${n}`, created: 1_764_400_000, model: String(body['model']) };
  if (body['stream'] !== true) {
    json(res, 200, {
      ...base,
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          message:
            call === undefined
              ? { role: 'assistant', content: ANSWER, refusal: null }
              : { role: 'assistant', content: null, refusal: null, tool_calls: [toolCall(JSON.stringify(call.args))] },
          logprobs: null,
          finish_reason: finish,
        },
      ],
      usage,
    });
    return;
  }
  const chunk = (choices: unknown[], extra: Obj = {}): Obj => ({
    ...base,
    object: 'chat.completion.chunk',
    choices,
    ...extra,
  });
  const withUsage = isObj(body['stream_options']) && body['stream_options']['include_usage'] === true;
  sse(
    res,
    [
      [undefined, chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])],
      ...(call === undefined
        ? [[undefined, chunk([{ index: 0, delta: { content: ANSWER }, finish_reason: null }])] as const]
        : [
            [
              undefined,
              chunk([{ index: 0, delta: { tool_calls: [{ index: 0, ...toolCall('') }] }, finish_reason: null }]),
            ] as const,
            [
              undefined,
              chunk([
                {
                  index: 0,
                  delta: { tool_calls: [{ index: 0, function: { arguments: JSON.stringify(call.args) } }] },
                  finish_reason: null,
                },
              ]),
            ] as const,
          ]),
      [undefined, chunk([{ index: 0, delta: {}, finish_reason: finish }])],
      ...(withUsage ? [[undefined, chunk([], { usage })] as const] : []),
    ],
    true,
  );
}

function answerResponses(res: http.ServerResponse, body: Obj, outcome: CacheOutcome, n: number, call?: ToolCall): void {
  const usage = {
    input_tokens: outcome.prompt,
    input_tokens_details: { cached_tokens: outcome.read },
    output_tokens: OUTPUT_TOKENS,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: outcome.prompt + OUTPUT_TOKENS,
  };
  const item = {
    id: `msg_cache_${n}`,
    type: 'message',
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text: ANSWER, annotations: [] }],
  };
  const response = (status: string, output: unknown[], u: Obj | null): Obj => ({
    id: `resp_cache_${n}`,
    object: 'response',
    created_at: 1_764_400_000,
    model: String(body['model']),
    status,
    output,
    error: null,
    incomplete_details: null,
    usage: u,
  });
  let seq = 0;
  const event = (type: string, data: Obj): readonly [string, Obj] => [type, { type, sequence_number: seq++, ...data }];
  if (call !== undefined) {
    const args = JSON.stringify(call.args);
    const fc = {
      id: `fc_cache_${n}`,
      type: 'function_call',
      status: 'completed',
      call_id: call.id,
      name: call.name,
      arguments: args,
    };
    if (body['stream'] !== true) json(res, 200, response('completed', [fc], usage));
    else
      sse(res, [
        event('response.created', { response: response('in_progress', [], null) }),
        event('response.output_item.added', { output_index: 0, item: { ...fc, status: 'in_progress', arguments: '' } }),
        event('response.function_call_arguments.delta', { item_id: fc.id, output_index: 0, delta: args }),
        event('response.function_call_arguments.done', { item_id: fc.id, output_index: 0, arguments: args }),
        event('response.output_item.done', { output_index: 0, item: fc }),
        event('response.completed', { response: response('completed', [fc], usage) }),
      ]);
    return;
  }
  if (body['stream'] !== true) {
    json(res, 200, response('completed', [item], usage));
    return;
  }
  sse(res, [
    event('response.created', { response: response('in_progress', [], null) }),
    event('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } }),
    event('response.content_part.added', {
      item_id: item.id,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [] },
    }),
    event('response.output_text.delta', {
      item_id: item.id,
      output_index: 0,
      content_index: 0,
      delta: ANSWER,
      logprobs: [],
    }),
    event('response.output_text.done', {
      item_id: item.id,
      output_index: 0,
      content_index: 0,
      text: ANSWER,
      logprobs: [],
    }),
    event('response.content_part.done', {
      item_id: item.id,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text: ANSWER, annotations: [] },
    }),
    event('response.output_item.done', { output_index: 0, item }),
    event('response.completed', { response: response('completed', [item], usage) }),
  ]);
}

function answerGemini(
  res: http.ServerResponse,
  model: string,
  stream: boolean,
  outcome: CacheOutcome,
  call?: ToolCall,
): void {
  const part = call === undefined ? { text: ANSWER } : { functionCall: { name: call.name, args: call.args } };
  const answer = {
    candidates: [{ content: { role: 'model', parts: [part] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: {
      promptTokenCount: outcome.prompt,
      candidatesTokenCount: OUTPUT_TOKENS,
      totalTokenCount: outcome.prompt + OUTPUT_TOKENS,
      ...(outcome.read > 0 ? { cachedContentTokenCount: outcome.read } : {}),
    },
    modelVersion: model,
    responseId: 'cache-fake',
  };
  if (!stream) json(res, 200, answer);
  else sse(res, [[undefined, answer]]);
}

// ---- the server ------------------------------------------------------------------------------

export async function startFakeCachingUpstream(): Promise<FakeCachingUpstream> {
  const requests: CachingRequestSeen[] = [];
  let anthropic = new Map<string, '5m' | '1h'>();
  let buckets = new Map<string, string[]>();
  let queued: { name: string; args: Record<string, unknown> }[] = [];
  /** The queued tool call this request takes, if it offers the tool. */
  const take = (wire: CachingWire, body: Obj, n: number): ToolCall | undefined => {
    const next = queued[0];
    if (next === undefined) return undefined;
    const name = offeredTools(wire, body).find((offered) => offered.includes(next.name));
    if (name === undefined) return undefined;
    queued.shift();
    return { name, args: next.args, id: `call_cache_${n}` };
  };
  const bucket = (name: string): string[] => {
    let list = buckets.get(name);
    if (list === undefined) buckets.set(name, (list = []));
    return list;
  };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const text = Buffer.concat(parts).toString('utf8');
      let body: Obj;
      try {
        const parsed: unknown = JSON.parse(text);
        if (!isObj(parsed)) throw new Error('not an object');
        body = parsed;
      } catch {
        json(res, 400, { error: { message: 'bad json', type: 'invalid_request_error' } });
        return;
      }
      const url = new URL(req.url ?? '/', 'http://fake');
      const n = requests.length + 1;
      const seen = (wire: CachingWire, cache: CacheOutcome): void => {
        requests.push({ wire, path: url.pathname, headers: req.headers, text, body, cache });
      };
      if (req.method === 'POST' && url.pathname === '/v1/messages') {
        const outcome = anthropicCache(anthropic, body);
        seen('anthropic', outcome);
        answerAnthropic(res, body, outcome, n, take('anthropic', body, n));
        return;
      }
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
        const key = typeof body['prompt_cache_key'] === 'string' ? body['prompt_cache_key'] : '';
        const outcome = prefixCache(bucket(`chat\0${String(body['model'])}\0${key}`), chatPrompt(body), 128);
        seen('openai', outcome);
        answerChat(res, body, outcome, n, take('openai', body, n));
        return;
      }
      if (req.method === 'POST' && url.pathname === '/v1/responses') {
        const key = typeof body['prompt_cache_key'] === 'string' ? body['prompt_cache_key'] : '';
        const outcome = prefixCache(bucket(`responses\0${String(body['model'])}\0${key}`), responsesPrompt(body), 128);
        seen('openai-responses', outcome);
        answerResponses(res, body, outcome, n, take('openai-responses', body, n));
        return;
      }
      const gemini = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(url.pathname);
      if (req.method === 'POST' && gemini !== null) {
        const model = decodeURIComponent(gemini[1] as string);
        const outcome = prefixCache(bucket(`gemini\0${model}`), geminiPrompt(body), 1);
        seen('gemini', outcome);
        answerGemini(res, model, gemini[2] === 'streamGenerateContent', outcome, take('gemini', body, n));
        return;
      }
      json(res, 404, { error: { message: `no route ${req.method ?? ''} ${url.pathname}`, type: 'not_found' } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    callTool(name, args) {
      queued.push({ name, args });
    },
    reset() {
      requests.length = 0;
      queued = [];
      anthropic = new Map();
      buckets = new Map();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
