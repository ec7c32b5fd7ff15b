import { memberSpans, skipSpace } from '../pass-through-text';
import type { JsonObject } from '../types';

/*
 * The fast path's chunk check (core/chat/fast-path.ts): an upstream's chunk goes to the client as
 * its own JSON text, only when that text says exactly what the translated path would write from
 * it (`readChunk`, then the adapter's `chunkJson`), less the fields the translation drops and plus
 * the ones it cannot carry. Any chunk with a quirk the translation smooths over (a missing index,
 * an empty finish reason, `reasoning` for `reasoning_content`, a usage on a chunk with choices, a
 * model key written twice, …) returns undefined: the provider hands it over normalised instead.
 */

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isIndex = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** Whether `text` holds `needle` exactly once. */
function once(text: string, needle: string): boolean {
  const at = text.indexOf(needle);
  return at !== -1 && text.indexOf(needle, at + needle.length) === -1;
}

function canonicalToolCall(call: unknown): boolean {
  if (!isObj(call) || !isIndex(call['index'])) return false;
  const id = call['id'];
  if (id !== undefined && (typeof id !== 'string' || id === '' || call['type'] !== 'function')) return false;
  const fn = call['function'];
  if (fn === undefined) return true;
  if (!isObj(fn)) return false;
  const name = fn['name'];
  const args = fn['arguments'];
  return (
    (name === undefined || (typeof name === 'string' && name !== '')) &&
    (args === undefined || typeof args === 'string')
  );
}

function canonicalChoice(choice: unknown): boolean {
  if (!isObj(choice) || !isIndex(choice['index'])) return false;
  const finish = choice['finish_reason'];
  if (finish !== null && (typeof finish !== 'string' || finish === '')) return false;
  const delta = choice['delta'];
  if (!isObj(delta)) return false;
  const content = delta['content'];
  if (content !== undefined && content !== null && typeof content !== 'string') return false;
  // `reasoning` (OpenRouter's name) is what the translation renames to `reasoning_content`.
  if (delta['reasoning'] !== undefined) return false;
  const calls = delta['tool_calls'];
  if (calls !== undefined && (!Array.isArray(calls) || !calls.every(canonicalToolCall))) return false;
  return true;
}

/** A chunk the fast path forwards, and what svc reads of it. */
export interface ForwardedChunk {
  /** The JSON text that goes to the client. */
  readonly out: string;
  /** Its output text, as `chunkText` reads it from `readChunk`'s chunk. */
  readonly text: string;
  /** Whether a choice finished in it. */
  readonly finished: boolean;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * `chunkText(readChunk(json))` of a chunk `forwardable` accepted, read from the JSON directly:
 * content, refusal, reasoning_content (not ''), each tool call's name and arguments.
 */
function textOf(choices: readonly Obj[]): { text: string; finished: boolean } {
  let text = '';
  let finished = false;
  for (const choice of choices) {
    if (choice['finish_reason'] !== null) finished = true;
    const delta = choice['delta'] as Obj;
    text += str(delta['content']) + str(delta['refusal']) + str(delta['reasoning_content']);
    const calls = delta['tool_calls'] as Obj[] | undefined;
    if (calls !== undefined)
      for (const call of calls) {
        const fn = call['function'] as Obj | undefined;
        if (fn !== undefined) text += str(fn['name']) + str(fn['arguments']);
      }
  }
  return { text, finished };
}

/**
 * The chunk to forward (its JSON text with svc's model id in place of the upstream's and
 * `"usage":null` dropped when the client did not ask for usage, and what svc reads of it), or
 * undefined when it must go through `readChunk` and be normalised. A chunk accepted here is one
 * `readChunk` accepts, with no usage. `json` is `data` parsed; `modelJson` is
 * `JSON.stringify(modelId)`.
 */
export function forwardable(
  data: string,
  json: JsonObject,
  includeUsage: boolean,
  modelId: string,
  modelJson: string,
): ForwardedChunk | undefined {
  const out = forwardedText(data, json, includeUsage, modelId, modelJson);
  return out === undefined ? undefined : { out, ...textOf(json['choices'] as Obj[]) };
}

function forwardedText(
  data: string,
  json: JsonObject,
  includeUsage: boolean,
  modelId: string,
  modelJson: string,
): string | undefined {
  const id = json['id'];
  if (typeof id !== 'string' || id === '' || !isIndex(json['created'])) return undefined;
  // An event of several data lines is JSON with line breaks in it: not one SSE line as it is.
  if (data.includes('\n') || data.includes('\r')) return undefined;
  if (json['object'] !== 'chat.completion.chunk') return undefined;
  const choices = json['choices'];
  if (!Array.isArray(choices) || choices.length === 0 || !choices.every(canonicalChoice)) return undefined;
  let text = data;
  // Every chunk carries `usage: null` for a client that asked for usage (its own comes last), and
  // none otherwise, as OpenAI sends them.
  const usage = json['usage'];
  if (usage === undefined ? includeUsage : usage !== null) return undefined;
  if (usage === null && !includeUsage) {
    const field = ',"usage":null';
    if (!once(text, '"usage"') || !once(text, field)) return undefined;
    const at = text.indexOf(field);
    text = text.slice(0, at) + text.slice(at + field.length);
  }
  const model = json['model'];
  if (typeof model !== 'string' || !once(text, '"model"')) return undefined;
  if (model === modelId) return text;
  const pattern = `"model":${JSON.stringify(model)}`;
  const at = text.indexOf(pattern);
  if (at === -1) return undefined;
  return text.slice(0, at) + '"model":' + modelJson + text.slice(at + pattern.length);
}

/*
 * The non-stream answer (issue 35): the upstream's JSON text goes to the client with svc's model id
 * in place of the upstream's and svc's usage (its cost, or svc's own count) in place of the
 * upstream's, only when the rest says exactly what the translated path would write from it
 * (`readCompletion`, then the adapter's `completionJson`), less the fields the translation drops
 * and plus the ones it cannot carry. Anything else returns undefined and is translated.
 */

function canonicalCall(call: unknown): boolean {
  if (!isObj(call) || typeof call['id'] !== 'string' || call['type'] !== 'function') return false;
  const fn = call['function'];
  return isObj(fn) && typeof fn['name'] === 'string' && typeof fn['arguments'] === 'string';
}

function canonicalMessageChoice(choice: unknown): boolean {
  if (!isObj(choice) || !isIndex(choice['index'])) return false;
  const finish = choice['finish_reason'];
  if (typeof finish !== 'string' || finish === '') return false;
  const logprobs = choice['logprobs'];
  if (logprobs !== undefined && logprobs !== null && !isObj(logprobs)) return false;
  const message = choice['message'];
  if (!isObj(message) || message['role'] !== 'assistant') return false;
  const content = message['content'];
  if (content !== null && typeof content !== 'string') return false;
  const refusal = message['refusal'];
  if (refusal !== undefined && refusal !== null && typeof refusal !== 'string') return false;
  // `reasoning` (OpenRouter's name) is renamed, and an empty reasoning_content dropped, by the translation.
  if (message['reasoning'] !== undefined) return false;
  const reasoning = message['reasoning_content'];
  if (reasoning !== undefined && (typeof reasoning !== 'string' || reasoning === '')) return false;
  const annotations = message['annotations'];
  if (annotations !== undefined && (!Array.isArray(annotations) || !annotations.every(isObj))) return false;
  const audio = message['audio'];
  if (audio !== undefined && !isObj(audio)) return false;
  const calls = message['tool_calls'];
  if (calls !== undefined && (!Array.isArray(calls) || !calls.every(canonicalCall))) return false;
  return true;
}

/**
 * The answer to forward, as the text before and after where svc's usage goes (svc's model id in
 * place of the upstream's), or undefined when it must go through `readCompletion`. An answer
 * accepted here is one `readCompletion` accepts. `text` is the body, `json` it parsed; `modelJson`
 * is `JSON.stringify(modelId)`.
 */
export function forwardableCompletion(
  text: string,
  json: JsonObject,
  modelJson: string,
): readonly [string, string] | undefined {
  const id = json['id'];
  if (typeof id !== 'string' || id === '' || !isIndex(json['created'])) return undefined;
  if (json['object'] !== 'chat.completion' || typeof json['model'] !== 'string') return undefined;
  const choices = json['choices'];
  if (!Array.isArray(choices) || choices.length === 0 || !choices.every(canonicalMessageChoice)) return undefined;
  const members = memberSpans(text, skipSpace(text, 0), (key) => key === 'model' || key === 'usage');
  const model = members?.spans.get('model');
  if (members === undefined || model === undefined) return undefined;
  const usage = members.spans.get('usage');
  if ((usage === undefined) !== (json['usage'] === undefined)) return undefined;
  // The usage goes where the upstream had it, or after the last member.
  const cut = usage ?? { start: members.lastEnd, end: members.lastEnd };
  const before = usage === undefined ? ',"usage":' : '';
  const replaced = (from: number, to: number): string =>
    model.start >= from && model.end <= to
      ? text.slice(from, model.start) + modelJson + text.slice(model.end, to)
      : text.slice(from, to);
  return [replaced(0, cut.start) + before, replaced(cut.end, text.length)];
}
