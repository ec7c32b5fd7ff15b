import type {
  WireChoice,
  WireChunk,
  WireChunkChoice,
  WireCompletion,
  WireToolCall,
  WireToolCallDelta,
  WireUsage,
} from '../types';

/*
 * Upstream JSON is untrusted: these readers accept the chat-completions wire (tolerating the
 * usual omissions of compatible servers) and return undefined for anything else, which the
 * provider reports as `upstream_error`.
 */

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const int = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;

export function readUsage(value: unknown): WireUsage | undefined {
  if (!isObj(value)) return undefined;
  const prompt = int(value['prompt_tokens']);
  const completion = int(value['completion_tokens']);
  if (prompt === undefined || completion === undefined) return undefined;
  const details = isObj(value['prompt_tokens_details']) ? value['prompt_tokens_details'] : undefined;
  // DeepSeek reports its cache reads as `prompt_cache_hit_tokens` (of `prompt_tokens`).
  const cached =
    (details === undefined ? undefined : int(details['cached_tokens'])) ?? int(value['prompt_cache_hit_tokens']);
  // Proxies that front Anthropic (OpenRouter, LiteLLM) report cache writes here.
  const cacheWrite = details === undefined ? undefined : int(details['cache_write_tokens']);
  const reasoning = isObj(value['completion_tokens_details'])
    ? int(value['completion_tokens_details']['reasoning_tokens'])
    : undefined;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: int(value['total_tokens']) ?? prompt + completion,
    ...(cached !== undefined || cacheWrite !== undefined
      ? {
          prompt_tokens_details: {
            cached_tokens: cached ?? 0,
            ...(cacheWrite !== undefined && cacheWrite > 0 ? { cache_write_tokens: cacheWrite } : {}),
          },
        }
      : {}),
    ...(reasoning !== undefined ? { completion_tokens_details: { reasoning_tokens: reasoning } } : {}),
  };
}

// Reasoning servers (DeepSeek, vLLM, Qwen, …) call it `reasoning_content`; OpenRouter and others `reasoning`.
function reasoningOf(value: Obj): string | undefined {
  const text = str(value['reasoning_content']) ?? str(value['reasoning']);
  return text === '' ? undefined : text;
}

function readToolCall(value: unknown): WireToolCall | undefined {
  if (!isObj(value) || !isObj(value['function'])) return undefined;
  const fn = value['function'];
  const name = str(fn['name']);
  if (name === undefined) return undefined;
  return { id: str(value['id']) ?? '', type: 'function', function: { name, arguments: str(fn['arguments']) ?? '' } };
}

function readChoice(value: unknown, position: number): WireChoice | undefined {
  if (!isObj(value) || !isObj(value['message'])) return undefined;
  const message = value['message'];
  const content = message['content'];
  if (content !== null && content !== undefined && typeof content !== 'string') return undefined;
  const calls: WireToolCall[] = [];
  if (Array.isArray(message['tool_calls'])) {
    for (const raw of message['tool_calls']) {
      const call = readToolCall(raw);
      if (call === undefined) return undefined;
      calls.push(call);
    }
  }
  const refusal = str(message['refusal']);
  const reasoning = reasoningOf(message);
  const annotations = Array.isArray(message['annotations']) ? message['annotations'].filter(isObj) : [];
  return {
    index: int(value['index']) ?? position,
    message: {
      role: 'assistant',
      content: content ?? null,
      ...(calls.length > 0 ? { tool_calls: calls } : {}),
      ...(refusal !== undefined ? { refusal } : {}),
      ...(annotations.length > 0 ? { annotations } : {}),
      ...(isObj(message['audio']) ? { audio: message['audio'] } : {}),
      ...(reasoning !== undefined ? { reasoning_content: reasoning } : {}),
    },
    finish_reason: str(value['finish_reason']) ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
    ...(isObj(value['logprobs']) ? { logprobs: value['logprobs'] } : {}),
  };
}

// The fields a completion and a chunk share; an upstream that omits them still gets an answer.
function readHeader(value: Record<string, unknown>): {
  id: string;
  created: number;
  model: string;
  system_fingerprint?: string;
  service_tier?: string;
} {
  const fingerprint = str(value['system_fingerprint']);
  const tier = str(value['service_tier']);
  return {
    id: str(value['id']) ?? '',
    created: int(value['created']) ?? Math.floor(Date.now() / 1000),
    model: str(value['model']) ?? '',
    ...(fingerprint !== undefined ? { system_fingerprint: fingerprint } : {}),
    ...(tier !== undefined ? { service_tier: tier } : {}),
  };
}

/** A non-streaming completion body, or undefined when it is not one. Usage may be missing. */
export function readCompletion(
  value: unknown,
): (Omit<WireCompletion, 'usage'> & { usage: WireUsage | undefined }) | undefined {
  if (!isObj(value) || !Array.isArray(value['choices']) || value['choices'].length === 0) return undefined;
  const choices: WireChoice[] = [];
  for (const [i, raw] of value['choices'].entries()) {
    const choice = readChoice(raw, i);
    if (choice === undefined) return undefined;
    choices.push(choice);
  }
  // Onto the header's own object, not `{ ...header, choices }`: a spread followed by keys the
  // source lacks gives each object a map of its own in V8's optimised code (core/chat/prepare.ts).
  return Object.assign(readHeader(value), { choices, usage: readUsage(value['usage']) });
}

function readToolCallDelta(value: unknown, position: number): WireToolCallDelta | undefined {
  if (!isObj(value)) return undefined;
  const delta: WireToolCallDelta = { index: int(value['index']) ?? position };
  const id = str(value['id']);
  if (id !== undefined && id !== '') delta.id = id;
  if (value['type'] === 'function' || id !== undefined) delta.type = 'function';
  if (isObj(value['function'])) {
    const name = str(value['function']['name']);
    const args = str(value['function']['arguments']);
    delta.function = {
      ...(name !== undefined && name !== '' ? { name } : {}),
      ...(args !== undefined ? { arguments: args } : {}),
    };
  }
  return delta;
}

function readChunkChoice(value: unknown, position: number): WireChunkChoice | undefined {
  if (!isObj(value)) return undefined;
  const rawDelta = isObj(value['delta']) ? value['delta'] : {};
  const delta: WireChunkChoice['delta'] = {};
  const role = str(rawDelta['role']);
  if (role !== undefined) delta.role = role;
  const content = rawDelta['content'];
  if (typeof content === 'string') delta.content = content;
  else if (content !== undefined && content !== null) return undefined;
  const refusal = str(rawDelta['refusal']);
  if (refusal !== undefined) delta.refusal = refusal;
  const reasoning = reasoningOf(rawDelta);
  if (reasoning !== undefined) delta.reasoning_content = reasoning;
  if (Array.isArray(rawDelta['tool_calls'])) {
    const calls: WireToolCallDelta[] = [];
    for (const [i, raw] of rawDelta['tool_calls'].entries()) {
      const call = readToolCallDelta(raw, i);
      if (call === undefined) return undefined;
      calls.push(call);
    }
    if (calls.length > 0) delta.tool_calls = calls;
  }
  const finish = str(value['finish_reason']);
  return {
    index: int(value['index']) ?? position,
    delta,
    finish_reason: finish === undefined || finish === '' ? null : finish,
    ...(isObj(value['logprobs']) ? { logprobs: value['logprobs'] } : {}),
  };
}

/** One streamed chunk, or undefined when it is not one. */
export function readChunk(value: unknown): WireChunk | undefined {
  if (!isObj(value) || !Array.isArray(value['choices'])) return undefined;
  const choices: WireChunkChoice[] = [];
  for (const [i, raw] of value['choices'].entries()) {
    const choice = readChunkChoice(raw, i);
    if (choice === undefined) return undefined;
    choices.push(choice);
  }
  const usage = readUsage(value['usage']);
  // As in readCompletion: onto the header's own object, one map for every chunk of a shape.
  const chunk: WireChunk = Object.assign(readHeader(value), { choices });
  if (usage !== undefined) chunk.usage = usage;
  return chunk;
}
