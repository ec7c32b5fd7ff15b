import { createHash } from 'node:crypto';
import type { ModelCacheConfig, ModelConfig, SvcConfig } from '../config/types';
import type { JsonObject, WireChatBody, WireMessage } from '../providers/llm/types';

/*
 * What svc does for the upstream's prompt cache (SPEC §13, issue 42), on the request side:
 *
 * - Claude Code's billing block (`x-anthropic-billing-header: cc_version=…; cch=…;`, first in its
 *   system prompt and changing per session or per request) never reaches an upstream: a prefix
 *   cache would miss from its first byte on every turn. It is removed from the neutral form (every
 *   translated path) and from an Anthropic body that goes upstream as it is (the native path and
 *   its fast path); `anthropic.strip_billing_header: false` keeps it.
 * - A `prompt_cache_key` for OpenAI-family upstreams when the client sent none: derived from the
 *   account (and with `cache.key: session`, the client's session id), a one-way hash that never
 *   names the account and is never shared between accounts. A client's own key goes on as it is.
 *   The key only steers the upstream's cache routing: it decides no identity and no money.
 *
 * Nothing here depends on time or randomness: the same request is the same upstream bytes.
 */

/** How a system text block of Claude Code's billing header begins. */
export const BILLING_HEADER_PREFIX = 'x-anthropic-billing-header:';

// The header's line and the separator after it: the "\n\n" the Anthropic adapter joins system
// blocks with, or the line break of a string system prompt whose first line it is.
const BILLING_LINE = /^x-anthropic-billing-header:[^\n]*(?:\n\n|\n|$)/;

/** The model's `cache:` settings, defaults filled in. */
export function cacheSettings(model: ModelConfig): ModelCacheConfig {
  return model.cache ?? { key: 'account', breakpoints: 'auto' };
}

/** Whether the billing block is removed before the upstream (`anthropic.strip_billing_header`, default true). */
export function stripsBillingHeader(config: Pick<SvcConfig, 'anthropic'>): boolean {
  return config.anthropic?.stripBillingHeader ?? true;
}

/** `text` without a first line that is the billing header; undefined when it has none. */
function withoutBillingLine(text: string): string | undefined {
  if (!text.startsWith(BILLING_HEADER_PREFIX)) return undefined;
  return text.replace(BILLING_LINE, '');
}

/**
 * The chat messages with the billing header removed from every system (and developer) message
 * that begins with it: the whole message when nothing else is left, its first line (and the
 * separator after it) otherwise. Other messages are the same objects.
 */
export function withoutBillingHeader(messages: readonly WireMessage[]): WireMessage[] {
  const out: WireMessage[] = [];
  let changed = false;
  for (const message of messages) {
    if (message.role !== 'system' && message.role !== 'developer') {
      out.push(message);
      continue;
    }
    const content = message.content;
    if (typeof content === 'string') {
      const rest = withoutBillingLine(content);
      if (rest === undefined) out.push(message);
      else {
        changed = true;
        if (rest !== '') out.push({ ...message, content: rest });
      }
      continue;
    }
    if (Array.isArray(content)) {
      const parts = content.flatMap((part) => {
        const rest =
          part.type === 'text' && typeof part['text'] === 'string' ? withoutBillingLine(part['text']) : undefined;
        if (rest === undefined) return [part];
        changed = true;
        return rest === '' ? [] : [{ ...part, text: rest }];
      });
      if (parts.length === content.length && parts.every((p, i) => p === content[i])) out.push(message);
      else if (parts.length > 0) out.push({ ...message, content: parts });
      continue;
    }
    out.push(message);
  }
  return changed ? out : (messages as WireMessage[]);
}

/**
 * An Anthropic Messages body with the billing block removed: every `system` text block that
 * begins with the header (the rest of the system prompt byte for byte as it was), or such a first
 * line of a string `system`. The same object when there is none.
 */
export function anthropicWithoutBillingHeader(body: JsonObject): JsonObject {
  const system = body['system'];
  if (typeof system === 'string') {
    const rest = withoutBillingLine(system);
    if (rest === undefined) return body;
    const { system: _system, ...others } = body;
    return rest === '' ? others : { ...body, system: rest };
  }
  if (!Array.isArray(system)) return body;
  const kept = system.filter(
    (block) =>
      !(
        typeof block === 'object' &&
        block !== null &&
        (block as JsonObject)['type'] === 'text' &&
        typeof (block as JsonObject)['text'] === 'string' &&
        ((block as JsonObject)['text'] as string).startsWith(BILLING_HEADER_PREFIX)
      ),
  );
  if (kept.length === system.length) return body;
  if (kept.length > 0) return { ...body, system: kept };
  const { system: _system, ...others } = body;
  return others;
}

/** A Responses body whose `instructions` begin with the billing header, without that line. */
export function responsesWithoutBillingHeader(body: JsonObject): JsonObject {
  const instructions = body['instructions'];
  if (typeof instructions !== 'string') return body;
  const rest = withoutBillingLine(instructions);
  if (rest === undefined) return body;
  const { instructions: _instructions, ...others } = body;
  return rest === '' ? others : { ...body, instructions: rest };
}

/** A Gemini body whose `systemInstruction` begins with the billing header, without it. */
export function geminiWithoutBillingHeader(body: JsonObject): JsonObject {
  const instruction = body['systemInstruction'];
  if (typeof instruction !== 'object' || instruction === null || Array.isArray(instruction)) return body;
  const parts = (instruction as JsonObject)['parts'];
  if (!Array.isArray(parts)) return body;
  let changed = false;
  const kept = parts.flatMap((part: unknown) => {
    const text = typeof part === 'object' && part !== null ? (part as JsonObject)['text'] : undefined;
    const rest = typeof text === 'string' ? withoutBillingLine(text) : undefined;
    if (rest === undefined) return [part];
    changed = true;
    return rest === '' ? [] : [{ ...(part as JsonObject), text: rest }];
  });
  if (!changed) return body;
  if (kept.length > 0) return { ...body, systemInstruction: { ...(instruction as JsonObject), parts: kept } };
  const { systemInstruction: _instruction, ...others } = body;
  return others;
}

/** A session id as a client sends it (Claude Code's `X-Claude-Code-Session-Id`, Codex's `session_id`). */
export const SESSION_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The `prompt_cache_key` svc sends for an account when the client sent none (SPEC §13): a
 * SHA-256 of the account id (and, with `cache.key: session`, the client's session id) under a
 * label of its own, so the key names neither and two accounts never share one. Undefined with
 * `cache.key: off`.
 */
export function derivedCacheKey(
  settings: ModelCacheConfig,
  accountId: string,
  sessionId: string | undefined,
): string | undefined {
  if (settings.key === 'off') return undefined;
  const hash = createHash('sha256').update('svc prompt cache key\0').update(accountId);
  if (settings.key === 'session' && sessionId !== undefined && sessionId !== '') hash.update('\0').update(sessionId);
  return `svc-${hash.digest('base64url').slice(0, 32)}`;
}

/** Who the call is for, as far as the cache is concerned. */
export interface CacheCaller {
  readonly accountId: string;
  /** The client's session id, when it sent one. */
  readonly sessionId?: string | undefined;
}

/**
 * The upstream request with svc's cache hygiene: the billing header removed (unless configured
 * to stay) and, when the client sent no `prompt_cache_key`, the account's (each provider sends it
 * only to an upstream that takes it: `openai`, `openai-responses`).
 */
export function cacheReady<T extends WireChatBody>(
  request: T,
  config: Pick<SvcConfig, 'anthropic'>,
  model: ModelConfig,
  caller: CacheCaller | undefined,
): T {
  let out = request;
  if (stripsBillingHeader(config)) {
    const messages = withoutBillingHeader(request.messages);
    if (messages !== request.messages) out = { ...out, messages };
  }
  const given = request['prompt_cache_key'];
  if (caller !== undefined && (given === undefined || given === null)) {
    const key = derivedCacheKey(cacheSettings(model), caller.accountId, caller.sessionId);
    if (key !== undefined) out = { ...out, prompt_cache_key: key };
  }
  return out;
}

/** A native body with the same hygiene, for the wire it is in. */
export function cacheReadyNative(
  body: JsonObject,
  wire: string | undefined,
  config: Pick<SvcConfig, 'anthropic'>,
  model: ModelConfig,
  caller: CacheCaller | undefined,
): JsonObject {
  const strip = stripsBillingHeader(config);
  if (wire === 'anthropic') return strip ? anthropicWithoutBillingHeader(body) : body;
  if (wire === 'gemini') return strip ? geminiWithoutBillingHeader(body) : body;
  if (wire !== 'openai-responses') return body;
  let out = strip ? responsesWithoutBillingHeader(body) : body;
  const given = out['prompt_cache_key'];
  if (caller !== undefined && (given === undefined || given === null)) {
    const key = derivedCacheKey(cacheSettings(model), caller.accountId, caller.sessionId);
    if (key !== undefined) out = { ...out, prompt_cache_key: key };
  }
  return out;
}
