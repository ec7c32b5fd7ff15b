import { countTokens } from './cl100k';
import { countInWorker, INLINE_COUNT_BYTES, noteTokenized } from './token-worker';
import type { WireChunk, WireCompletion, WireMessage, WireTool, WireUsage } from './types';

/*
 * Local token counting. Upstreams that report no usage and streams a client left are charged
 * from `estimateUsage` (cl100k_base, below). The free count endpoints and the sandbox use the
 * quick estimate (`estimateTextTokens`, `estimatePromptTokens`): one token per four UTF-8 bytes
 * of text (OpenAI's rule of thumb for English), rounded up, plus four tokens of framing per
 * message and a flat 85 per image; it is never the basis of a charge for a real upstream.
 *
 * The upper bound used for the wallet hold is the smaller of two bounds:
 * - bytes: one token per UTF-8 byte of the serialised request (no byte-level BPE or byte-fallback
 *   SentencePiece token is shorter than one byte), valid for every tokenizer;
 * - tokenizer: the request's serialised JSON counted with cl100k_base (a real BPE, gpt-tokenizer)
 *   times 3/2. cl100k is the least efficient of the current large vocabularies on the samples in
 *   test/upstreams/hold-bound.test.ts (o200k, Llama 3's 128k tiktoken superset, Qwen's and
 *   DeepSeek's 100k+ BPEs and Gemini's 256k SentencePiece count fewer; Anthropic's tokenizer counts
 *   up to ~1.35× more on English), and the JSON carries every key, quote and escape beyond the text
 *   the chat template renders, so the margin covers every family svc serves. A model with a
 *   small vocabulary (32k SentencePiece, e.g. Llama 2 or Mistral 7B v0.1, on non-Latin scripts)
 *   can exceed it; the charge is then the hold (the most a call can cost, SPEC §6), logged and counted.
 * Both add per-message framing, a tool-use system prompt allowance (Anthropic injects ~350
 * tokens with tools) and a per-image allowance. Above TOKENIZE_MAX_BYTES the tokenizer is not run
 * (its cost grows with the prompt) and the bytes bound stands.
 */

// cl100k_base's BPE is quadratic in the length of one pre-tokenized piece (a run of letters or of
// punctuation): 100,000 letters in a row take it some 20 s. Runs longer than this are counted in
// slices of this length (a slice ends a merge, so the count may differ by a token per slice),
// which keeps the count linear; ordinary text never has such runs and is counted exactly.
const LONG_RUN = 256;
const LONG_RUN_RE = /(\S{257,}|\s{257,})/;

/** Whether `code` (a UTF-16 code unit) is what `\s` matches in a regular expression without the u flag. */
function isSpace(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  if (code < 0xa0) return false;
  return (
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/**
 * `LONG_RUN_RE.test(text)` in one pass: the regular expression retries at every position of a
 * run, so on a request's JSON (every request's hold counts it) it cost several times the scan.
 */
function hasLongRun(text: string): boolean {
  let run = 0;
  let space = false;
  for (let i = 0; i < text.length; i++) {
    const s = isSpace(text.charCodeAt(i));
    if (s === space) {
      if (++run > LONG_RUN) return true;
    } else {
      space = s;
      run = 1;
    }
  }
  return false;
}

/**
 * cl100k_base's count of `text` in time linear in its length (long runs counted in slices); may
 * stop once past `stopAbove`. A cut can also save a token where BPE's greedy merges would not, so
 * an upper bound adds `perSlice` tokens for every slice of a long run.
 */
export function countTokensLinear(text: string, stopAbove = Number.POSITIVE_INFINITY, perSlice = 0): number {
  noteTokenized(Buffer.byteLength(text, 'utf8'));
  if (!hasLongRun(text)) return countTokens(text);
  let total = 0;
  for (const [i, part] of text.split(LONG_RUN_RE).entries()) {
    // split() with a capture group puts the long runs at odd positions.
    if (i % 2 === 0) total += part === '' ? 0 : countTokens(part);
    else
      for (let at = 0; at < part.length && total <= stopAbove; at += LONG_RUN)
        total += countTokens(part.slice(at, at + LONG_RUN)) + perSlice;
    if (total > stopAbove) return total;
  }
  return total;
}

const BYTES_PER_TOKEN = 4;
const MESSAGE_OVERHEAD = 4;
const IMAGE_ESTIMATE = 85;
const IMAGE_UPPER_BOUND = 2000;

export function estimateTextTokens(text: string): number {
  if (text === '') return 0;
  return Math.ceil(Buffer.byteLength(text, 'utf8') / BYTES_PER_TOKEN);
}

function contentText(message: WireMessage): { text: string; images: number } {
  let text = '';
  let images = 0;
  const content = message.content;
  if (typeof content === 'string') text += content;
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (typeof part['text'] === 'string') text += part['text'];
      else if (part.type === 'image_url' || part.type === 'input_image') images += 1;
      else text += JSON.stringify(part);
    }
  }
  if (typeof message.refusal === 'string') text += message.refusal;
  for (const call of message.tool_calls ?? []) text += call.function.name + call.function.arguments;
  return { text, images };
}

/** A realistic estimate of the prompt tokens of a request. */
export function estimatePromptTokens(messages: readonly WireMessage[], tools: readonly WireTool[] = []): number {
  let total = 3;
  for (const message of messages) {
    const { text, images } = contentText(message);
    total += MESSAGE_OVERHEAD + estimateTextTokens(text) + images * IMAGE_ESTIMATE;
  }
  if (tools.length > 0) total += estimateTextTokens(JSON.stringify(tools));
  return total;
}

/** Tokens the upstream may add for tool definitions beyond their JSON (a tool-use system prompt). */
const TOOLS_ALLOWANCE = 512;
/** The tokenizer bound's margin over cl100k_base, as a fraction (3/2). */
const MARGIN_NUM = 3;
const MARGIN_DEN = 2;
/**
 * The most text the tokenizer counts for one request (issue 31): a serialised prompt above it,
 * or an embeddings request's texts beyond it, are counted by the bytes bound instead (one token
 * per UTF-8 byte). Counting this much costs up to about a quarter second of CPU on long runs of
 * letters, so above INLINE_COUNT_BYTES it runs on the token worker (token-worker.ts), never on
 * the event loop, and only once the caller's wallet covers the least such a call can cost.
 */
export const TOKENIZE_MAX_BYTES = 256 * 1024;

/** The bytes bound and the tokenizer bound of a serialised prompt (see the notes at the top). */
export function textTokenUpperBound(json: string): number {
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > TOKENIZE_MAX_BYTES) return bytes;
  return Math.min(bytes, Math.ceil((countTokensLinear(json, bytes, 1) * MARGIN_NUM) / MARGIN_DEN));
}

/** `textTokenUpperBound`, with a large text counted on the token worker instead of this thread. */
export async function textTokenUpperBoundOffThread(json: string): Promise<number> {
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > TOKENIZE_MAX_BYTES || bytes <= INLINE_COUNT_BYTES) return textTokenUpperBound(json);
  return Math.min(bytes, Math.ceil(((await countInWorker(json, bytes, 1)) * MARGIN_NUM) / MARGIN_DEN));
}

/**
 * The prompt's upper bound for the wallet hold, computed on demand: `bytes` (the serialised
 * prompt's size) is known at once, so a caller can check the wallet for the least the call can
 * cost before `value()` runs the tokenizer (inline when small, on the token worker when large,
 * not at all above TOKENIZE_MAX_BYTES).
 */
export interface PromptBound {
  readonly bytes: number;
  value(): Promise<number>;
}

function boundParts(messages: readonly WireMessage[], tools: readonly WireTool[]) {
  let images = 0;
  for (const message of messages) images += contentText(message).images;
  const extra =
    messages.length * MESSAGE_OVERHEAD + (tools.length > 0 ? TOOLS_ALLOWANCE : 0) + images * IMAGE_UPPER_BOUND;
  return { json: JSON.stringify({ messages, tools }), extra };
}

/** An upper bound of the prompt tokens of a request, for the wallet hold (counted on this thread). */
export function promptTokenUpperBound(messages: readonly WireMessage[], tools: readonly WireTool[] = []): number {
  const { json, extra } = boundParts(messages, tools);
  return textTokenUpperBound(json) + extra;
}

/** `promptTokenUpperBound` as a PromptBound: nothing is counted until `value()` is asked for. */
export function promptBound(messages: readonly WireMessage[], tools: readonly WireTool[] = []): PromptBound {
  const { json, extra } = boundParts(messages, tools);
  let memo: Promise<number> | undefined;
  return {
    bytes: Buffer.byteLength(json, 'utf8'),
    value: () => (memo ??= textTokenUpperBoundOffThread(json).then((n) => n + extra)),
  };
}

/** A bound that is already known (tests, and bounds derived from another). */
export function knownBound(bytes: number, value: number | (() => Promise<number>)): PromptBound {
  return { bytes, value: typeof value === 'number' ? () => Promise.resolve(value) : value };
}

/**
 * svc's own count of a call whose upstream reported no usage (SPEC §6), marked `estimated`: the
 * text of every message and of the tools, and the output text, counted with cl100k_base
 * (gpt-tokenizer), plus the framing of `estimatePromptTokens` (4 per message, 3 per request, 85
 * per image). Past TOKENIZE_MAX_BYTES of text the rest is counted at one token per 4 bytes, so
 * the count stays cheap. The charge it gives is never more than the hold (the wallet's rule).
 */
export function estimateUsage(
  messages: readonly WireMessage[],
  tools: readonly WireTool[] | undefined,
  outputText: string,
): WireUsage {
  let budget = TOKENIZE_MAX_BYTES;
  const count = (text: string): number => {
    if (text === '') return 0;
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > budget) return estimateTextTokens(text);
    budget -= bytes;
    return countTokensLinear(text);
  };
  let prompt = 3;
  for (const message of messages) {
    const { text, images } = contentText(message);
    prompt += MESSAGE_OVERHEAD + count(text) + images * IMAGE_ESTIMATE;
  }
  if (tools !== undefined && tools.length > 0) prompt += count(JSON.stringify(tools));
  const completion = count(outputText);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, estimated: true };
}

/** The text a completion's choices produced (answer, refusal, reasoning, tool calls), for `estimateUsage`. */
export function completionText(completion: Pick<WireCompletion, 'choices'>): string {
  let text = '';
  for (const { message } of completion.choices) {
    text += (message.content ?? '') + (message.refusal ?? '') + (message.reasoning_content ?? '');
    for (const call of message.tool_calls ?? []) text += call.function.name + call.function.arguments;
  }
  return text;
}

/** The text one stream chunk adds (as `completionText`). */
export function chunkText(chunk: WireChunk): string {
  let text = '';
  for (const { delta } of chunk.choices) {
    text += (delta.content ?? '') + (delta.refusal ?? '') + (delta.reasoning_content ?? '');
    for (const call of delta.tool_calls ?? []) text += (call.function?.name ?? '') + (call.function?.arguments ?? '');
  }
  return text;
}
