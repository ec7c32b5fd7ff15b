import {
  ChatRole,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatMessage,
  type Usage,
} from '../../gen/svc/core/v1/chat';
import type { ToolCall, ToolCallDelta } from '../../gen/svc/core/v1/chat';
import type { WireChunk, WireCompletion, WireToolCall, WireUsage } from '../providers/llm/types';
import { customInputOf } from './custom-tools';

const NO_CUSTOM_TOOLS: ReadonlySet<string> = new Set();

/** An upstream call as the client's: a call of a custom tool's function is that tool's call. */
function toolCallToProto(call: WireToolCall, custom: ReadonlySet<string>): ToolCall {
  if (custom.has(call.function.name))
    return {
      id: call.id,
      type: 'custom',
      custom: { name: call.function.name, input: customInputOf(call.function.arguments) },
    };
  return { id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } };
}

/** Wire usage plus the credits charged, as the proto `Usage`. */
export function usageToProto(usage: WireUsage, cost: bigint): Usage {
  return {
    promptTokens: BigInt(usage.prompt_tokens),
    completionTokens: BigInt(usage.completion_tokens),
    totalTokens: BigInt(usage.prompt_tokens + usage.completion_tokens),
    cost,
    cachedTokens: BigInt(usage.prompt_tokens_details?.cached_tokens ?? 0),
    reasoningTokens: BigInt(usage.completion_tokens_details?.reasoning_tokens ?? 0),
    cacheWriteTokens: BigInt(usage.prompt_tokens_details?.cache_write_tokens ?? 0),
    estimated: usage.estimated === true,
    cacheWrite1hTokens: BigInt(usage.prompt_tokens_details?.cache_write_1h_tokens ?? 0),
  };
}

/** `custom`: the names of the request's custom tools (customToolNames in params.ts). */
export function completionToProto(
  completion: WireCompletion,
  cost: bigint,
  custom: ReadonlySet<string> = NO_CUSTOM_TOOLS,
): ChatCompletion {
  return {
    id: completion.id,
    created: BigInt(completion.created),
    model: completion.model,
    choices: completion.choices.map((choice) => {
      const message: ChatMessage = {
        role: ChatRole.CHAT_ROLE_ASSISTANT,
        parts: [],
        name: '',
        toolCalls: (choice.message.tool_calls ?? []).map((call) => toolCallToProto(call, custom)),
        toolCallId: '',
        ...(choice.message.content !== null ? { content: choice.message.content } : {}),
        ...(typeof choice.message.refusal === 'string' ? { refusal: choice.message.refusal } : {}),
        ...(choice.message.annotations !== undefined ? { annotations: choice.message.annotations } : {}),
        ...(choice.message.audio !== undefined ? { audio: choice.message.audio } : {}),
        ...(choice.message.reasoning_content !== undefined
          ? { reasoningContent: choice.message.reasoning_content }
          : {}),
      };
      return {
        index: choice.index,
        message,
        finishReason: choice.finish_reason,
        ...(choice.logprobs !== undefined ? { logprobs: choice.logprobs } : {}),
      };
    }),
    usage: usageToProto(completion.usage, cost),
    systemFingerprint: completion.system_fingerprint ?? '',
    serviceTier: completion.service_tier ?? '',
    ...(completion.native !== undefined ? { nativeBody: completion.native } : {}),
  };
}

export function chunkToProto(chunk: WireChunk, usage?: Usage): ChatCompletionChunk {
  return {
    id: chunk.id,
    created: BigInt(chunk.created),
    model: chunk.model,
    choices: chunk.choices.map((choice) => ({
      index: choice.index,
      finishReason: choice.finish_reason ?? '',
      delta: {
        role: choice.delta.role ?? '',
        toolCalls: (choice.delta.tool_calls ?? []).map((call) => ({
          index: call.index,
          id: call.id ?? '',
          type: call.type ?? '',
          ...(call.function !== undefined
            ? { function: { name: call.function.name ?? '', arguments: call.function.arguments ?? '' } }
            : {}),
        })),
        ...(typeof choice.delta.content === 'string' ? { content: choice.delta.content } : {}),
        ...(typeof choice.delta.refusal === 'string' ? { refusal: choice.delta.refusal } : {}),
        ...(typeof choice.delta.reasoning_content === 'string'
          ? { reasoningContent: choice.delta.reasoning_content }
          : {}),
      },
      ...(choice.logprobs !== undefined ? { logprobs: choice.logprobs } : {}),
    })),
    ...(usage !== undefined ? { usage } : {}),
    systemFingerprint: chunk.system_fingerprint ?? '',
    serviceTier: chunk.service_tier ?? '',
    nativeEvents: chunk.native ?? [],
  };
}

/**
 * The chunks of a stream whose request has custom tools. A custom tool's call starts as OpenAI
 * streams it (`{index, id, type: "custom", custom: {name, input: ""}}`); the upstream streams the
 * arguments of a function (`{"input": "…"}`), which are JSON until they are whole, so the input
 * follows in one delta (`{index, custom: {input}}`) once they are: in a chunk of its own just
 * before the choice's finish_reason (or the end of the stream). Chunks left with nothing to say
 * are not sent. Without custom tools every chunk is chunkToProto's.
 */
export interface ChunkTranslator {
  /** The chunks to send for an upstream chunk (the last one, with `usage`, flushes what is left). */
  chunks(chunk: WireChunk, usage?: Usage): ChatCompletionChunk[];
}

export function chunkTranslator(custom: ReadonlySet<string>): ChunkTranslator {
  if (custom.size === 0) return { chunks: (chunk, usage) => [chunkToProto(chunk, usage)] };
  // The custom calls still open, by choice, then by tool call index: their arguments so far.
  const open = new Map<number, Map<number, { args: string }>>();

  // The chunk that finishes the open custom calls of these choices (none: nothing open).
  const finish = (base: WireChunk, choices: readonly number[]): ChatCompletionChunk | undefined => {
    const out = chunkToProto({ ...base, choices: [], native: [] });
    for (const index of choices) {
      const calls = open.get(index);
      if (calls === undefined) continue;
      open.delete(index);
      const toolCalls: ToolCallDelta[] = [...calls]
        .map(([at, call]): ToolCallDelta => ({
          index: at,
          id: '',
          type: '',
          custom: { name: '', input: customInputOf(call.args) },
        }))
        .filter((call) => call.custom?.input !== '');
      if (toolCalls.length > 0) out.choices.push({ index, finishReason: '', delta: { role: '', toolCalls } });
    }
    return out.choices.length > 0 ? out : undefined;
  };

  return {
    chunks(chunk, usage) {
      const proto = chunkToProto(chunk, usage);
      proto.choices = proto.choices.flatMap((choice) => {
        const delta = choice.delta;
        if (delta === undefined) return [choice];
        let calls = open.get(choice.index);
        delta.toolCalls = delta.toolCalls.flatMap((call): ToolCallDelta[] => {
          const known = calls?.get(call.index);
          if (known !== undefined) {
            known.args += call.function?.arguments ?? '';
            return [];
          }
          const name = call.function?.name ?? '';
          if (call.id === '' || !custom.has(name)) return [call];
          if (calls === undefined) open.set(choice.index, (calls = new Map()));
          calls.set(call.index, { args: call.function?.arguments ?? '' });
          return [{ index: call.index, id: call.id, type: 'custom', custom: { name, input: '' } }];
        });
        const empty =
          delta.role === '' &&
          delta.content === undefined &&
          delta.toolCalls.length === 0 &&
          delta.refusal === undefined &&
          delta.reasoningContent === undefined &&
          choice.finishReason === '' &&
          choice.logprobs === undefined;
        return empty ? [] : [choice];
      });
      // Finished choices (or, with the usage, every one) get their custom calls' inputs first.
      const done =
        usage !== undefined ? [...open.keys()] : proto.choices.filter((c) => c.finishReason !== '').map((c) => c.index);
      const before = done.length > 0 ? finish(chunk, done) : undefined;
      const keep =
        proto.choices.length > 0 || chunk.choices.length === 0 || usage !== undefined || proto.nativeEvents.length > 0;
      return [...(before !== undefined ? [before] : []), ...(keep ? [proto] : [])];
    },
  };
}
