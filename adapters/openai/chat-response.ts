import type { ChatCompletion, ChatCompletionChunk, Usage } from '../../gen/svc/core/v1/chat';

/* proto → OpenAI wire JSON for chat completions and models. */

type Obj = Record<string, unknown>;

export function usageJson(usage: Usage): Obj {
  return {
    prompt_tokens: Number(usage.promptTokens),
    completion_tokens: Number(usage.completionTokens),
    total_tokens: Number(usage.totalTokens),
    prompt_tokens_details: {
      cached_tokens: Number(usage.cachedTokens),
      // Only where there were any: OpenAI itself sends the field only on its newest models.
      ...(usage.cacheWriteTokens > 0n ? { cache_write_tokens: Number(usage.cacheWriteTokens) } : {}),
    },
    completion_tokens_details: { reasoning_tokens: Number(usage.reasoningTokens) },
    // Credits charged for this request.
    cost: Number(usage.cost),
    // The upstream reported no usage: the counts are svc's own, and charged as such (SPEC §6).
    ...(usage.estimated ? { estimated: true } : {}),
  };
}

export function completionJson(c: ChatCompletion): Obj {
  return {
    id: c.id,
    object: 'chat.completion',
    created: Number(c.created),
    model: c.model,
    choices: c.choices.map((choice) => {
      const m = choice.message;
      const message: Obj = { role: 'assistant', content: m?.content ?? null, refusal: m?.refusal ?? null };
      // The upstream's reasoning, where DeepSeek, vLLM and OpenRouter put it (OpenAI has no field
      // for it; its schema allows extra fields): clients such as opencode and Cline show it.
      if (m?.reasoningContent !== undefined) message['reasoning_content'] = m.reasoningContent;
      if (m?.annotations !== undefined) message['annotations'] = m.annotations;
      if (m?.audio !== undefined) message['audio'] = m.audio;
      if (m !== undefined && m.toolCalls.length > 0) {
        message['tool_calls'] = m.toolCalls.map((t) =>
          t.custom !== undefined
            ? { id: t.id, type: 'custom', custom: { name: t.custom.name, input: t.custom.input } }
            : {
                id: t.id,
                type: 'function',
                function: { name: t.function?.name ?? '', arguments: t.function?.arguments ?? '' },
              },
        );
      }
      return {
        index: choice.index,
        message,
        logprobs: choice.logprobs ?? null,
        finish_reason: choice.finishReason || 'stop',
      };
    }),
    ...(c.usage !== undefined ? { usage: usageJson(c.usage) } : {}),
    system_fingerprint: c.systemFingerprint,
    service_tier: c.serviceTier || 'default',
  };
}

/**
 * One SSE chunk. With `include_usage`, every chunk carries `usage: null` and the last one
 * (`choices: []`) the usage, as OpenAI sends them.
 */
export function chunkJson(c: ChatCompletionChunk, includeUsage: boolean): Obj {
  const out: Obj = {
    id: c.id,
    object: 'chat.completion.chunk',
    created: Number(c.created),
    model: c.model,
    system_fingerprint: c.systemFingerprint,
    service_tier: c.serviceTier || 'default',
    choices: c.choices.map((choice) => {
      const d = choice.delta;
      const delta: Obj = {};
      if (d !== undefined) {
        if (d.role !== '') delta['role'] = d.role;
        if (d.content !== undefined) delta['content'] = d.content;
        if (d.reasoningContent !== undefined) delta['reasoning_content'] = d.reasoningContent;
        if (d.refusal !== undefined) delta['refusal'] = d.refusal;
        if (d.toolCalls.length > 0) {
          delta['tool_calls'] = d.toolCalls.map((t) => {
            const call: Obj = { index: t.index };
            if (t.id !== '') {
              call['id'] = t.id;
              call['type'] = t.custom !== undefined ? 'custom' : 'function';
            }
            // A custom tool's call: its name first, then its input (openai-node 7's chunk types).
            if (t.custom !== undefined)
              call['custom'] = { ...(t.custom.name !== '' ? { name: t.custom.name } : {}), input: t.custom.input };
            else if (t.function !== undefined)
              call['function'] = {
                ...(t.function.name !== '' ? { name: t.function.name } : {}),
                arguments: t.function.arguments,
              };
            return call;
          });
        }
      }
      return {
        index: choice.index,
        delta,
        logprobs: choice.logprobs ?? null,
        finish_reason: choice.finishReason === '' ? null : choice.finishReason,
      };
    }),
  };
  if (includeUsage) out['usage'] = c.usage !== undefined ? usageJson(c.usage) : null;
  return out;
}

export { modelJson } from './models';
