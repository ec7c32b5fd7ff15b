import type { ChatCompletion, ChatCompletionChunk, Usage } from '../../gen/svc/core/v1/chat';
import type { Model } from '../../gen/svc/core/v1/models';

/* The core's chat answers → Gemini `GenerateContentResponse` JSON, whole or as stream frames. */

type Obj = Record<string, unknown>;

const FINISH: Record<string, string> = {
  stop: 'STOP',
  length: 'MAX_TOKENS',
  // Gemini has no finish reason for a call: a turn that calls functions ends with STOP.
  tool_calls: 'STOP',
  function_call: 'STOP',
  content_filter: 'SAFETY',
};

/** Gemini's finishReason for a chat finish reason. */
export function finishReason(finish: string): string {
  return FINISH[finish] ?? 'STOP';
}

/**
 * `usageMetadata` from the usage the core charged: reasoning tokens are Gemini's
 * `thoughtsTokenCount`, apart from `candidatesTokenCount` (both billed as output), and cache reads
 * are `cachedContentTokenCount`, inside `promptTokenCount`.
 */
export function usageMetadata(usage: Usage | undefined): Obj {
  const prompt = Number(usage?.promptTokens ?? 0n);
  const output = Number(usage?.completionTokens ?? 0n);
  const thoughts = Number(usage?.reasoningTokens ?? 0n);
  const cached = Number(usage?.cachedTokens ?? 0n);
  const out: Obj = {
    promptTokenCount: prompt,
    candidatesTokenCount: Math.max(0, output - thoughts),
    totalTokenCount: prompt + output,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
  };
  if (thoughts > 0) out['thoughtsTokenCount'] = thoughts;
  if (cached > 0) out['cachedContentTokenCount'] = cached;
  // The upstream reported no usage: svc's own count (an extra field the SDKs carry through).
  if (usage?.estimated === true) out['estimated'] = true;
  return out;
}

/** A model's arguments as the object `functionCall.args` must be (`{}` when not JSON). */
export function argsOf(args: string): Obj {
  try {
    const value = JSON.parse(args === '' ? '{}' : args) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Obj) : { value };
  } catch {
    return {};
  }
}

/** A whole (non-stream) answer. */
export function generateContentJson(c: ChatCompletion, includeThoughts: boolean): Obj {
  const candidates = c.choices.map((choice) => {
    const m = choice.message;
    const parts: Obj[] = [];
    if (includeThoughts && m?.reasoningContent !== undefined && m.reasoningContent !== '')
      parts.push({ text: m.reasoningContent, thought: true });
    const text = m?.content ?? m?.refusal;
    if (text !== undefined && text !== '') parts.push({ text });
    for (const call of m?.toolCalls ?? [])
      parts.push({
        functionCall: { id: call.id, name: call.function?.name ?? '', args: argsOf(call.function?.arguments ?? '') },
      });
    if (parts.length === 0) parts.push({ text: '' });
    return {
      content: { role: 'model', parts },
      finishReason: finishReason(choice.finishReason),
      index: choice.index,
    };
  });
  return {
    candidates,
    usageMetadata: usageMetadata(c.usage),
    modelVersion: c.model,
    responseId: c.id,
  };
}

interface PendingCall {
  id: string;
  name: string;
  args: string;
}

/**
 * Turns the core's chat chunks into Gemini stream frames. Text and thoughts go out as they come;
 * a function call goes out whole (Gemini never streams a call's arguments), in the last frame,
 * with the finish reason and the usage that was charged.
 */
export class GenerateStream {
  private id = '';
  private model: string;
  private readonly calls = new Map<number, Map<number, PendingCall>>();
  private readonly finish = new Map<number, string>();
  private usage: Usage | undefined;

  constructor(
    model: string,
    private readonly includeThoughts: boolean,
  ) {
    this.model = model;
  }

  /** The frames for one chunk (none when it carries only call fragments or usage). */
  chunk(c: ChatCompletionChunk): Obj[] {
    if (c.id !== '') this.id = c.id;
    if (c.model !== '') this.model = c.model;
    if (c.usage !== undefined) this.usage = c.usage;
    const candidates: Obj[] = [];
    for (const choice of c.choices) {
      const d = choice.delta;
      const parts: Obj[] = [];
      if (this.includeThoughts && d?.reasoningContent !== undefined && d.reasoningContent !== '')
        parts.push({ text: d.reasoningContent, thought: true });
      const text = d?.content ?? d?.refusal;
      if (text !== undefined && text !== '') parts.push({ text });
      for (const call of d?.toolCalls ?? []) {
        let byIndex = this.calls.get(choice.index);
        if (byIndex === undefined) this.calls.set(choice.index, (byIndex = new Map()));
        const pending = byIndex.get(call.index) ?? { id: '', name: '', args: '' };
        if (call.id !== '') pending.id = call.id;
        if (call.function?.name) pending.name = call.function.name;
        pending.args += call.function?.arguments ?? '';
        byIndex.set(call.index, pending);
      }
      if (choice.finishReason !== '') this.finish.set(choice.index, choice.finishReason);
      if (parts.length > 0) candidates.push({ content: { role: 'model', parts }, index: choice.index });
    }
    return candidates.length === 0 ? [] : [this.frame(candidates, false)];
  }

  /** The closing frame of a stream that ended normally. */
  end(): Obj {
    const indexes = new Set([...this.finish.keys(), ...this.calls.keys()]);
    if (indexes.size === 0) indexes.add(0);
    const candidates = [...indexes]
      .sort((a, b) => a - b)
      .map((index) => {
        const calls = [...(this.calls.get(index)?.entries() ?? [])].sort(([a], [b]) => a - b);
        const parts: Obj[] = calls.map(([, call]) => ({
          functionCall: { id: call.id, name: call.name, args: argsOf(call.args) },
        }));
        if (parts.length === 0) parts.push({ text: '' });
        return {
          content: { role: 'model', parts },
          finishReason: finishReason(this.finish.get(index) ?? 'stop'),
          index,
        };
      });
    return this.frame(candidates, true);
  }

  private frame(candidates: Obj[], last: boolean): Obj {
    const frame: Obj = { candidates };
    if (last) frame['usageMetadata'] = usageMetadata(this.usage);
    frame['modelVersion'] = this.model;
    frame['responseId'] = this.id;
    return frame;
  }
}

/**
 * What svc's Gemini API serves for a model of each kind: chat models generate and count, embedding
 * models embed, image and speech models generate (their answer in `inlineData` parts, SPEC §14);
 * the other media kinds are served on the OpenAI-compatible routes only.
 */
function generationMethods(kind: string): string[] {
  if (kind === '' || kind === 'chat') return ['generateContent', 'streamGenerateContent', 'countTokens'];
  if (kind === 'embedding') return ['embedContent', 'batchEmbedContents'];
  if (kind === 'image' || kind === 'speech') return ['generateContent', 'streamGenerateContent'];
  return [];
}

/** A model as Gemini's `Model` resource. */
export function modelJson(m: Model): Obj {
  return {
    name: `models/${m.id}`,
    baseModelId: m.id,
    version: '001',
    displayName: m.id,
    description: `${m.id} on svc`,
    inputTokenLimit: Number(m.contextWindow),
    outputTokenLimit: Number(m.maxOutputTokens),
    supportedGenerationMethods: generationMethods(m.kind),
    thinking: m.kind === '' || m.kind === 'chat',
  };
}
