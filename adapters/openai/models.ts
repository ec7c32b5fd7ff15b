import { createHash } from 'node:crypto';
import type { Model } from '../../gen/svc/core/v1/models';

/*
 * The two shapes of GET /models (SPEC §7d): OpenAI's list (`{"object": "list", "data": [...]}`)
 * and, when the client names its version (`?client_version=`, Codex 0.156 and later), Codex's
 * catalog (`{"models": [ModelInfo...]}`, openai/codex `codex-rs/protocol/src/openai_models.rs`),
 * with an ETag so an unchanged catalog is a 304. Both say each model's kind (chat, embedding, or a
 * media kind: image, speech, transcription, moderation, rerank).
 */

type Obj = Record<string, unknown>;

// Codex puts a catalog entry's `base_instructions` in front of every request of that model; its
// bundled models keep their own (they are not listed here).
const BASE_INSTRUCTIONS = `You are a coding agent running in the user's terminal. Work on the user's task until it is done: read the relevant code before changing it, make focused changes with the tools you are given, run the project's checks when you can, and explain briefly what you changed and why. Ask only when the task is truly ambiguous. Prefer small, reviewable edits; never discard the user's work.`;

/** One model in OpenAI's list shape, plus what a client needs to size its requests and its kind. */
export function modelJson(m: Model): Obj {
  return {
    id: m.id,
    object: 'model',
    created: Number(m.created),
    owned_by: m.ownedBy,
    // Beyond OpenAI's Model (clients ignore them).
    context_window: Number(m.contextWindow),
    max_output_tokens: Number(m.maxOutputTokens),
    kind: m.kind === '' ? 'chat' : m.kind,
  };
}

/**
 * One model as Codex's ModelInfo: every field it requires; embedding and media models (SPEC §14)
 * are listed but hidden and not usable.
 */
function codexModel(m: Model, priority: number): Obj {
  const kind = m.kind === '' ? 'chat' : m.kind;
  const chat = kind === 'chat';
  return {
    slug: m.id,
    display_name: m.id,
    description: chat
      ? `${m.id}: ${Number(m.contextWindow)}-token context, up to ${Number(m.maxOutputTokens)} output tokens`
      : `${m.id}: ${kind === 'embedding' ? 'an embedding' : `a ${kind}`} model`,
    supported_reasoning_levels: [],
    shell_type: 'shell_command',
    visibility: chat ? 'list' : 'none',
    supported_in_api: chat,
    priority,
    upgrade: null,
    base_instructions: BASE_INSTRUCTIONS,
    supports_reasoning_summaries: false,
    support_verbosity: false,
    default_verbosity: null,
    apply_patch_tool_type: 'freeform',
    truncation_policy: { mode: 'bytes', limit: 10_000 },
    supports_parallel_tool_calls: true,
    context_window: Number(m.contextWindow),
    experimental_supported_tools: [],
    input_modalities: ['text', 'image'],
    kind,
  };
}

/** Codex's catalog and its ETag (a hash of the body: the same models give the same tag). */
export function codexCatalog(models: readonly Model[]): { body: Obj; etag: string } {
  const body = { models: models.map((m, i) => codexModel(m, i + 1)) };
  const etag = `"${createHash('sha256').update(JSON.stringify(body)).digest('base64url').slice(0, 27)}"`;
  return { body, etag };
}

/** Whether an If-None-Match header names `etag` (a list, weak tags and `*` included). */
export function matchesEtag(ifNoneMatch: string, etag: string): boolean {
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}
