import {
  ChatRole,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatMessage,
  type Usage,
} from '../../gen/svc/core/v1/chat';
import type { WireChunk, WireCompletion, WireUsage } from '../providers/llm/types';

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
  };
}

export function completionToProto(completion: WireCompletion, cost: bigint): ChatCompletion {
  return {
    id: completion.id,
    created: BigInt(completion.created),
    model: completion.model,
    choices: completion.choices.map((choice) => {
      const message: ChatMessage = {
        role: ChatRole.CHAT_ROLE_ASSISTANT,
        parts: [],
        name: '',
        toolCalls: (choice.message.tool_calls ?? []).map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.function.name, arguments: call.function.arguments },
        })),
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
