import { createHash } from 'node:crypto';
import { SvcError } from '../../../errors';
import { estimatePromptTokens, estimateTextTokens } from '../tokens';
import { narrowedToAllowed } from '../translate';
import type {
  ChatProvider,
  JsonObject,
  WireChatRequest,
  WireChunk,
  WireCompletion,
  WireMessage,
  WireTool,
  WireToolCall,
} from '../types';

/** Marks everything the sandbox produces, in content and in `system_fingerprint`. */
export const SANDBOX_FINGERPRINT = 'fp_svc_sandbox';
export const SANDBOX_LABEL = '[sandbox]';

function textOf(message: WireMessage | undefined): string {
  if (message === undefined) return '';
  if (typeof message.content === 'string') return message.content;
  if (Array.isArray(message.content))
    return message.content.map((p) => (typeof p['text'] === 'string' ? p['text'] : '')).join(' ');
  return '';
}

// Coding assistants put their context (date, CLAUDE.md, the workspace) ahead of the person's words
// in the same user turn: Claude Code in `<system-reminder>` blocks, Gemini CLI in a
// `<session_context>` one. They are not what the person asked.
const SYSTEM_REMINDER = /<(system-reminder|session_context)>[\s\S]*?<\/\1>/g;

/** What the person wrote in a user turn: its text without the client's injected reminders. */
function promptOf(message: WireMessage | undefined): string {
  const text = textOf(message);
  const stripped = text.replace(SYSTEM_REMINDER, '').trim();
  return stripped === '' ? text : stripped;
}

function summary(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 200)}…` : flat;
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 24);
}

function exampleValue(schema: unknown, text: string): unknown {
  const s = (typeof schema === 'object' && schema !== null ? schema : {}) as JsonObject;
  if (Array.isArray(s['enum']) && s['enum'].length > 0) return s['enum'][0];
  switch (s['type']) {
    case 'number':
    case 'integer':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object':
      return {};
    default:
      return summary(text).slice(0, 100);
  }
}

function argumentsFor(tool: WireTool, text: string): string {
  const params = tool.function.parameters ?? {};
  const properties = (
    typeof params['properties'] === 'object' && params['properties'] !== null ? params['properties'] : {}
  ) as JsonObject;
  const required = Array.isArray(params['required'])
    ? params['required'].filter((r): r is string => typeof r === 'string')
    : Object.keys(properties);
  const args: JsonObject = {};
  for (const name of required) args[name] = exampleValue(properties[name], text);
  return JSON.stringify(args);
}

/**
 * A tool's name without the MCP client's namespace: Codex and Claude Code offer svc's tools as
 * `mcp__svc__maps_search_places`, Gemini CLI as `mcp_svc_maps_search_places`.
 */
function bareName(name: string): string {
  return name.replace(/^mcp_{1,2}[A-Za-z0-9-]+?_{1,2}(?=[A-Za-z])/, '');
}

/** The tool a prompt names in any of those forms (bare or prefixed), whatever form the client offers it in. */
function namedBare(tools: readonly WireTool[], text: string): WireTool | undefined {
  const words = new Set((text.match(/[A-Za-z0-9_-]+/g) ?? []).map(bareName));
  return tools.find((t) => words.has(bareName(t.function.name)));
}

/*
 * A prompt that asks for a tool without naming one gets the offered tool sharing a word with it
 * ("the maps tool": maps_search_places), else the first offered tool that does not start a
 * sub-agent: an assistant's sub-agent tool (Claude Code's `Agent`, formerly `Task`) would be given
 * the same prompt, ask again, and recurse, billing every level.
 */
const SPAWNS_AGENT = /agent|^task$/i;

function looselyNamed(tools: readonly WireTool[], text: string): WireTool | undefined {
  const words = new Set((text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((w) => w.length >= 4));
  return tools.find((t) =>
    bareName(t.function.name)
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .some((part) => part.length >= 4 && words.has(part)),
  );
}

/** A tool call the sandbox makes: the tool, and its arguments when they are not the schema's examples. */
interface Choice {
  readonly tool: WireTool;
  readonly args?: string;
}

// Claude Code's tool search: its MCP tools are deferred, named only in a system message ("Use
// ToolSearch with query \"select:<name>\" to load tool schemas"), and offered from the turn after
// its ToolSearch tool loaded them.
const TOOL_SEARCH = 'ToolSearch';

/** The deferred tool, listed in the request's system text, that the prompt names (bare or prefixed). */
function deferredNamed(request: WireChatRequest, text: string): string | undefined {
  const words = new Set((text.match(/[A-Za-z0-9_-]+/g) ?? []).map(bareName));
  const system = request.messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map(textOf)
    .join('\n');
  const found = (system.match(/[A-Za-z0-9_-]+/g) ?? []).filter((w) => w !== TOOL_SEARCH && words.has(bareName(w)));
  // The listed name is the client's (prefixed) one; the bare name may also occur in instructions.
  return found.find((w) => w !== bareName(w)) ?? found[0];
}

/** The tool names the assistant called since the last user turn. */
function calledSinceUser(request: WireChatRequest): Set<string> {
  const called = new Set<string>();
  for (const m of [...request.messages].reverse()) {
    if (m.role === 'user') break;
    for (const call of m.tool_calls ?? []) called.add(call.function.name);
  }
  return called;
}

// Calls a tool only when the request makes that the expected answer: a forced or required tool
// choice, or a user turn that names a tool or asks for one. A named tool that is deferred is first
// searched for; after a tool result, the named tool is called if it was not yet (it may only now
// be offered, loaded by that search).
function chooseTool(request: WireChatRequest, last: WireMessage | undefined, text: string): Choice | undefined {
  const tools = request.tools ?? [];
  if (tools.length === 0 || request.tool_choice === 'none') return undefined;
  const named = tools.find((t) => text.includes(t.function.name)) ?? namedBare(tools, text);
  if (last?.role === 'tool') {
    return named !== undefined && !calledSinceUser(request).has(named.function.name) ? { tool: named } : undefined;
  }
  if (last?.role !== 'user') return undefined;
  const choice = request.tool_choice;
  if (typeof choice === 'object' && choice !== null) {
    const fn = choice['function'] as JsonObject | undefined;
    const forced = tools.find((t) => t.function.name === fn?.['name']);
    return forced === undefined ? undefined : { tool: forced };
  }
  if (named !== undefined) return { tool: named };
  const search = tools.find((t) => t.function.name === TOOL_SEARCH);
  const deferred = search === undefined ? undefined : deferredNamed(request, text);
  if (search !== undefined && deferred !== undefined)
    return { tool: search, args: JSON.stringify({ query: `select:${deferred}` }) };
  if (choice === 'required' || /\b(tool|function|call)\b/i.test(text)) {
    const fallback = looselyNamed(tools, text) ?? tools.find((t) => !SPAWNS_AGENT.test(bareName(t.function.name)));
    return fallback === undefined ? undefined : { tool: fallback };
  }
  return undefined;
}

/**
 * A value valid for a JSON Schema's common keywords (type, enum, const, properties, required,
 * items, minItems, minimum, anyOf), so that structured-output callers (Gemini CLI's prompt
 * classifier among them) get JSON their schema accepts from the offline model too.
 */
export function sampleOf(schema: unknown, text: string, depth = 0): unknown {
  const s = (typeof schema === 'object' && schema !== null ? schema : {}) as JsonObject;
  if ('const' in s) return s['const'];
  if (Array.isArray(s['enum']) && s['enum'].length > 0) return s['enum'][0];
  const variants = s['anyOf'] ?? s['oneOf'];
  if (Array.isArray(variants) && variants.length > 0) return sampleOf(variants[0], text, depth + 1);
  const type = Array.isArray(s['type']) ? s['type'].find((t) => t !== 'null') : s['type'];
  const min = typeof s['minimum'] === 'number' ? s['minimum'] : undefined;
  switch (type) {
    case 'integer':
      return min === undefined ? 1 : Math.ceil(min);
    case 'number':
      return min ?? 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array': {
      const count = typeof s['minItems'] === 'number' ? s['minItems'] : 0;
      return depth > 8 ? [] : Array.from({ length: count }, () => sampleOf(s['items'], text, depth + 1));
    }
    case 'object': {
      const properties = (
        typeof s['properties'] === 'object' && s['properties'] !== null ? s['properties'] : {}
      ) as JsonObject;
      const out: JsonObject = {};
      if (depth > 8) return out;
      for (const [name, sub] of Object.entries(properties)) out[name] = sampleOf(sub, text, depth + 1);
      return out;
    }
    case 'string':
      return summary(text).slice(0, typeof s['maxLength'] === 'number' ? s['maxLength'] : 100);
    default:
      return typeof s['properties'] === 'object'
        ? sampleOf({ ...s, type: 'object' }, text, depth)
        : summary(text).slice(0, 100);
  }
}

/** The JSON a `response_format` asks for, or undefined for text. */
function structured(request: WireChatRequest, text: string): string | undefined {
  const format = request['response_format'] as JsonObject | undefined;
  if (format?.['type'] === 'json_object') return JSON.stringify({ answer: `${SANDBOX_LABEL} ${summary(text)}` });
  if (format?.['type'] !== 'json_schema') return undefined;
  const spec = (format['json_schema'] ?? {}) as JsonObject;
  return JSON.stringify(sampleOf(spec['schema'], `${SANDBOX_LABEL} ${text}`));
}

interface Answer {
  content: string | null;
  toolCall: WireToolCall | undefined;
  finishReason: string;
}

function answer(request: WireChatRequest): Answer {
  // A system or developer message after the turn (Claude Code sends one after the user's) does
  // not change whose turn is being answered.
  const last = [...request.messages].reverse().find((m) => m.role !== 'system' && m.role !== 'developer');
  const lastUser = [...request.messages].reverse().find((m) => m.role === 'user');
  const text = promptOf(lastUser);
  const chosen = chooseTool(request, last, text);
  if (chosen !== undefined) {
    const { tool } = chosen;
    return {
      content: null,
      toolCall: {
        id: `call_${digest(text + tool.function.name)}`,
        type: 'function',
        function: { name: tool.function.name, arguments: chosen.args ?? argumentsFor(tool, text) },
      },
      finishReason: 'tool_calls',
    };
  }
  const json = structured(request, text);
  if (json !== undefined) return { content: json, toolCall: undefined, finishReason: 'stop' };
  let content =
    last?.role === 'tool'
      ? `${SANDBOX_LABEL} The tool returned: "${summary(textOf(last))}".`
      : `${SANDBOX_LABEL} You said: "${summary(text)}" (${text.split(/\s+/).filter(Boolean).length} words). This is the offline sandbox model.`;
  const limit = request.max_tokens ?? request.max_completion_tokens;
  if (typeof limit === 'number' && limit > 0 && estimateTextTokens(content) > limit) {
    content = content.slice(0, limit * 4);
    return { content, toolCall: undefined, finishReason: 'length' };
  }
  return { content, toolCall: undefined, finishReason: 'stop' };
}

function choicesCount(request: WireChatRequest): number {
  return typeof request['n'] === 'number' && request['n'] > 1 ? request['n'] : 1;
}

function checkSignal(signal: AbortSignal): void {
  if (signal.aborted) throw new SvcError('cancelled', 'The request was cancelled');
}

function completion(request: WireChatRequest, signal: AbortSignal): WireCompletion {
  checkSignal(signal);
  // allowed_tools: the sandbox chooses among those tools only.
  const a = answer(narrowedToAllowed(request));
  const n = choicesCount(request);
  const outputTokens =
    n *
    (estimateTextTokens(a.content ?? '') +
      (a.toolCall ? estimateTextTokens(a.toolCall.function.name + a.toolCall.function.arguments) : 0));
  const promptTokens = estimatePromptTokens(request.messages, request.tools ?? []);
  const result: WireCompletion = {
    id: `chatcmpl-sandbox-${digest(JSON.stringify(request.messages))}`,
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    choices: Array.from({ length: n }, (_, index) => ({
      index,
      message: {
        role: 'assistant' as const,
        content: a.content,
        ...(a.toolCall ? { tool_calls: [a.toolCall] } : {}),
      },
      finish_reason: a.finishReason,
    })),
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: outputTokens,
      total_tokens: promptTokens + outputTokens,
    },
    system_fingerprint: SANDBOX_FINGERPRINT,
  };
  return result;
}

/**
 * The built-in offline model: deterministic, labelled, and free of any network use. It echoes a
 * summary of the last user message, or calls a tool when the request asks for one.
 */
export function createSandboxProvider(): ChatProvider {
  return {
    name: 'sandbox',

    complete(request, signal) {
      return Promise.resolve(completion(request, signal));
    },

    async *stream(request, signal) {
      const full = completion(request, signal);
      const base = { id: full.id, created: full.created, model: full.model, system_fingerprint: SANDBOX_FINGERPRINT };
      const chunk = (choices: WireChunk['choices']): WireChunk => ({ ...base, choices });
      for (const choice of full.choices) {
        const index = choice.index;
        checkSignal(signal);
        yield chunk([{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
        const call = choice.message.tool_calls?.[0];
        if (call !== undefined) {
          yield chunk([
            {
              index,
              delta: {
                tool_calls: [
                  { index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
                ],
              },
              finish_reason: null,
            },
          ]);
          const args = call.function.arguments;
          const half = Math.ceil(args.length / 2);
          for (const piece of [args.slice(0, half), args.slice(half)]) {
            checkSignal(signal);
            if (piece !== '')
              yield chunk([
                { index, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, finish_reason: null },
              ]);
          }
        } else {
          for (const piece of (choice.message.content ?? '').match(/\S+\s*|\s+/g) ?? []) {
            checkSignal(signal);
            yield chunk([{ index, delta: { content: piece }, finish_reason: null }]);
          }
        }
        yield chunk([{ index, delta: {}, finish_reason: choice.finish_reason }]);
      }
      yield { ...chunk([]), usage: full.usage };
    },
  };
}
