import type { ChatCompletionParams, ChatMessage } from '../../gen/svc/core/v1/chat';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { argsOf } from './response';

/*
 * A `googleSearch` tool (Gemini CLI's `google_web_search`) is served by the core's hosted
 * web_search, the one the Responses API runs (core/chat/responses/hosted-search.ts): the request
 * goes to the core as a Responses request with a `web_search` tool, so every search is billed at
 * the web_search tariff on the same wallet (free when it finds nothing) and every model turn like
 * any chat call. The answer comes back as Gemini's `groundingMetadata`: the found pages as
 * `groundingChunks`, the queries as `webSearchQueries`, and a `groundingSupports` entry wherever the
 * answer quotes a page's URL.
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function inputItems(m: ChatMessage): Obj[] {
  switch (m.role) {
    case ChatRole.CHAT_ROLE_USER: {
      const content =
        m.parts.length === 0
          ? [{ type: 'input_text', text: m.content ?? '' }]
          : m.parts.map((p) =>
              p.part?.$case === 'imageUrl'
                ? { type: 'input_image', image_url: p.part.value.url, detail: 'auto' }
                : { type: 'input_text', text: p.part?.$case === 'text' ? p.part.value : '' },
            );
      return [{ type: 'message', role: 'user', content }];
    }
    case ChatRole.CHAT_ROLE_ASSISTANT: {
      const out: Obj[] = [];
      if (m.content !== undefined && m.content !== '')
        out.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: m.content }] });
      for (const call of m.toolCalls)
        out.push({
          type: 'function_call',
          call_id: call.id,
          name: call.function?.name ?? '',
          arguments: call.function?.arguments ?? '{}',
        });
      return out;
    }
    case ChatRole.CHAT_ROLE_TOOL:
      return [{ type: 'function_call_output', call_id: m.toolCallId, output: m.content ?? '' }];
    default:
      return [];
  }
}

/** The Responses request that serves a Gemini request with a `googleSearch` tool. */
export function responsesBody(params: ChatCompletionParams): Obj {
  const system = params.messages.filter((m) => m.role === ChatRole.CHAT_ROLE_SYSTEM).map((m) => m.content ?? '');
  const body: Obj = {
    model: params.model,
    input: params.messages.flatMap(inputItems),
    tools: [
      ...params.tools.map((t) => ({
        type: 'function',
        name: t.function?.name ?? '',
        description: t.function?.description ?? '',
        parameters: t.function?.parameters ?? { type: 'object', properties: {} },
        strict: false,
      })),
      { type: 'web_search' },
    ],
    store: false,
    stream: false,
  };
  if (system.length > 0) body['instructions'] = system.join('\n');
  if (params.maxTokens > 0) body['max_output_tokens'] = params.maxTokens;
  if (params.temperature !== undefined) body['temperature'] = params.temperature;
  if (params.topP !== undefined) body['top_p'] = params.topP;
  const choice = params.toolChoice?.choice;
  if (choice?.$case === 'mode') body['tool_choice'] = choice.value;
  else if (choice?.$case === 'functionName') body['tool_choice'] = { type: 'function', name: choice.value };
  const format = params.responseFormat;
  if (format?.type === 'json_object') body['text'] = { format: { type: 'json_object' } };
  if (format?.type === 'json_schema')
    body['text'] = {
      format: { type: 'json_schema', name: 'response', schema: format.jsonSchema?.['schema'], strict: false },
    };
  return body;
}

/** Byte offsets, as Gemini's `segment` counts them (UTF-8), of a character range. */
function byteRange(text: string, start: number, end: number): { startIndex: number; endIndex: number } {
  return {
    startIndex: Buffer.byteLength(text.slice(0, start)),
    endIndex: Buffer.byteLength(text.slice(0, end)),
  };
}

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

/**
 * Gemini's finishReason for a Responses status: an answer cut by its output limit is MAX_TOKENS;
 * one whose search loop stopped at a failed step (the core's `svc_reason`) is OTHER.
 */
function finishOf(response: Obj): string {
  if (response['status'] !== 'incomplete') return 'STOP';
  const details = response['incomplete_details'];
  return isObj(details) && typeof details['svc_reason'] === 'string' ? 'OTHER' : 'MAX_TOKENS';
}

/** A Responses answer (with its hosted searches) as a Gemini GenerateContentResponse. */
export function groundedJson(response: Obj, includeThoughts: boolean): Obj {
  const output = Array.isArray(response['output']) ? (response['output'] as unknown[]).filter(isObj) : [];
  const thoughts: Obj[] = [];
  const calls: Obj[] = [];
  const queries: string[] = [];
  const chunks: { uri: string; title: string }[] = [];
  const chunkOf = (uri: string, title: string): number => {
    let i = chunks.findIndex((c) => c.uri === uri);
    if (i < 0) i = chunks.push({ uri, title: title || new URL(uri).hostname }) - 1;
    else if (title !== '' && chunks[i]?.title !== title) chunks[i] = { uri, title };
    return i;
  };
  const supports: Obj[] = [];
  let text = '';
  for (const item of output) {
    if (item['type'] === 'web_search_call' && isObj(item['action'])) {
      const action = item['action'];
      if (typeof action['query'] === 'string' && action['query'] !== '') queries.push(action['query']);
      for (const s of Array.isArray(action['sources']) ? action['sources'] : [])
        if (isObj(s) && typeof s['url'] === 'string' && /^https?:/.test(s['url'])) chunkOf(s['url'], '');
    } else if (item['type'] === 'reasoning' && includeThoughts) {
      const summary = Array.isArray(item['summary']) ? item['summary'].filter(isObj) : [];
      const thought = summary.map((s) => String(s['text'] ?? '')).join('');
      if (thought !== '') thoughts.push({ text: thought, thought: true });
    } else if (item['type'] === 'message' && Array.isArray(item['content'])) {
      for (const c of item['content'].filter(isObj)) {
        if (c['type'] !== 'output_text' || typeof c['text'] !== 'string') continue;
        const base = text;
        text += c['text'];
        for (const a of Array.isArray(c['annotations']) ? c['annotations'].filter(isObj) : []) {
          if (a['type'] !== 'url_citation' || typeof a['url'] !== 'string') continue;
          const index = chunkOf(a['url'], typeof a['title'] === 'string' ? a['title'] : '');
          const start = base.length + num(a['start_index']);
          const end = base.length + num(a['end_index']);
          supports.push({
            segment: { ...byteRange(text, start, end), text: text.slice(start, end) },
            groundingChunkIndices: [index],
          });
        }
      }
    } else if (item['type'] === 'function_call') {
      calls.push({
        functionCall: {
          id: String(item['call_id'] ?? ''),
          name: String(item['name'] ?? ''),
          args: argsOf(String(item['arguments'] ?? '')),
        },
      });
    }
  }
  const parts = [...thoughts, ...(text === '' ? [] : [{ text }]), ...calls];
  if (parts.length === 0) parts.push({ text: '' });
  const candidate: Obj = {
    content: { role: 'model', parts },
    finishReason: finishOf(response),
    index: 0,
  };
  if (queries.length > 0 || chunks.length > 0)
    candidate['groundingMetadata'] = {
      webSearchQueries: queries,
      groundingChunks: chunks.map((c) => ({ web: { uri: c.uri, title: c.title } })),
      groundingSupports: supports,
    };
  const usage = isObj(response['usage']) ? response['usage'] : {};
  const prompt = num(usage['input_tokens']);
  const out = num(usage['output_tokens']);
  const cached = isObj(usage['input_tokens_details']) ? num(usage['input_tokens_details']['cached_tokens']) : 0;
  const reasoning = isObj(usage['output_tokens_details']) ? num(usage['output_tokens_details']['reasoning_tokens']) : 0;
  const usageMetadata: Obj = {
    promptTokenCount: prompt,
    candidatesTokenCount: Math.max(0, out - reasoning),
    totalTokenCount: prompt + out,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
  };
  if (reasoning > 0) usageMetadata['thoughtsTokenCount'] = reasoning;
  if (cached > 0) usageMetadata['cachedContentTokenCount'] = cached;
  return {
    candidates: [candidate],
    usageMetadata,
    modelVersion: String(response['model'] ?? ''),
    responseId: String(response['id'] ?? ''),
  };
}
