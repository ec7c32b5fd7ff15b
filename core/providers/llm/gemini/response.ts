import { randomBase64url } from '../../../ids';
import type { JsonObject, WireChoice, WireToolCall, WireUsage } from '../types';

/*
 * Google's GenerateContentResponse read as chat-completions pieces: `thought` parts are
 * reasoning, `functionCall` parts tool calls (with ids svc makes: Google's are optional), the
 * finish reason in OpenAI's words, and the usage on SPEC §6's terms.
 */

export interface GeminiPart {
  readonly text?: string;
  readonly thought: boolean;
  readonly functionCall?: { readonly name: string; readonly args: unknown };
}

export interface GeminiCandidate {
  readonly index: number;
  readonly parts: readonly GeminiPart[];
  /** Google's finishReason, when this frame ends the candidate. */
  readonly finishReason: string | undefined;
}

export interface GeminiAnswer {
  readonly candidates: readonly GeminiCandidate[];
  readonly usage: WireUsage | undefined;
  readonly responseId: string | undefined;
  /** Google blocked the prompt (`promptFeedback.blockReason`): no candidates follow. */
  readonly blocked: boolean;
}

function obj(value: unknown): JsonObject | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}

/**
 * `promptTokenCount` (plus `toolUsePromptTokenCount`) is the input, `cachedContentTokenCount` its
 * cached part, `candidatesTokenCount + thoughtsTokenCount` the output (thoughts as reasoning).
 */
export function usageOf(metadata: unknown): WireUsage | undefined {
  const m = obj(metadata);
  if (m === undefined || typeof m['promptTokenCount'] !== 'number') return undefined;
  const prompt = count(m['promptTokenCount']) + count(m['toolUsePromptTokenCount']);
  const thoughts = count(m['thoughtsTokenCount']);
  const completion = count(m['candidatesTokenCount']) + thoughts;
  const cached = count(m['cachedContentTokenCount']);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached > 0 ? { prompt_tokens_details: { cached_tokens: cached } } : {}),
    ...(thoughts > 0 ? { completion_tokens_details: { reasoning_tokens: thoughts } } : {}),
  };
}

/** A GenerateContentResponse (a whole answer or one stream frame); undefined when it is not one. */
export function readAnswer(json: unknown): GeminiAnswer | undefined {
  const root = obj(json);
  if (root === undefined) return undefined;
  const rawCandidates = root['candidates'];
  if (rawCandidates !== undefined && !Array.isArray(rawCandidates)) return undefined;
  const candidates: GeminiCandidate[] = [];
  for (const [position, raw] of (rawCandidates ?? []).entries()) {
    const c = obj(raw);
    if (c === undefined) return undefined;
    const parts: GeminiPart[] = [];
    const rawParts = obj(c['content'])?.['parts'];
    for (const p of Array.isArray(rawParts) ? rawParts : []) {
      const part = obj(p);
      if (part === undefined) continue;
      const call = obj(part['functionCall']);
      if (call !== undefined && typeof call['name'] === 'string')
        parts.push({ thought: false, functionCall: { name: call['name'], args: call['args'] ?? {} } });
      else if (typeof part['text'] === 'string') parts.push({ text: part['text'], thought: part['thought'] === true });
    }
    candidates.push({
      index: typeof c['index'] === 'number' ? c['index'] : position,
      parts,
      finishReason: typeof c['finishReason'] === 'string' ? c['finishReason'] : undefined,
    });
  }
  const blocked = typeof obj(root['promptFeedback'])?.['blockReason'] === 'string';
  if (rawCandidates === undefined && !blocked && root['usageMetadata'] === undefined) return undefined;
  return {
    candidates,
    usage: usageOf(root['usageMetadata']),
    responseId: typeof root['responseId'] === 'string' ? root['responseId'] : undefined,
    blocked,
  };
}

const FILTERED = new Set([
  'SAFETY',
  'RECITATION',
  'BLOCKLIST',
  'PROHIBITED_CONTENT',
  'SPII',
  'IMAGE_SAFETY',
  'LANGUAGE',
]);

/** Google's finishReason in OpenAI's words; a turn that called a function finished with `tool_calls`. */
export function finishReasonOf(reason: string | undefined, calledTools: boolean): string {
  if (reason === 'MAX_TOKENS') return 'length';
  if (reason !== undefined && FILTERED.has(reason)) return 'content_filter';
  return calledTools ? 'tool_calls' : 'stop';
}

/** A tool call id of svc's making (Google's calls carry none by default). */
export function newToolCallId(): string {
  return `call_${randomBase64url(12)}`;
}

export function toolCallOf(call: NonNullable<GeminiPart['functionCall']>): WireToolCall {
  return {
    id: newToolCallId(),
    type: 'function',
    function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) },
  };
}

/** One whole candidate as a chat-completions choice. */
export function choiceOf(candidate: GeminiCandidate): WireChoice {
  let content = '';
  let reasoning = '';
  const calls: WireToolCall[] = [];
  for (const part of candidate.parts) {
    if (part.functionCall !== undefined) calls.push(toolCallOf(part.functionCall));
    else if (part.thought) reasoning += part.text ?? '';
    else content += part.text ?? '';
  }
  return {
    index: candidate.index,
    message: {
      role: 'assistant',
      content: content === '' && calls.length > 0 ? null : content,
      ...(calls.length > 0 ? { tool_calls: calls } : {}),
      ...(reasoning !== '' ? { reasoning_content: reasoning } : {}),
    },
    finish_reason: finishReasonOf(candidate.finishReason, calls.length > 0),
  };
}
