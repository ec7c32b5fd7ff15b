import type { CompactionMode, MediaKind, ModelConfig, ModelKind, OutputLimitField } from './types';

export type ModelProvider = ModelConfig['provider'];

/** The upstream kinds a model's upstream may name (SPEC §4). */
export const MODEL_PROVIDERS: readonly ModelProvider[] = [
  'openai',
  'openai-responses',
  'anthropic',
  'gemini',
  'sandbox',
  'cohere',
];
/** The values of a model's `kind`. */
export const MODEL_KINDS: readonly ModelKind[] = [
  'chat',
  'embedding',
  'image',
  'speech',
  'transcription',
  'moderation',
  'rerank',
];
/** The upstream kinds that serve each media kind (SPEC §14). */
export const MEDIA_PROVIDERS: Readonly<Record<MediaKind, readonly ModelProvider[]>> = {
  image: ['openai', 'gemini', 'sandbox'],
  speech: ['openai', 'gemini', 'sandbox'],
  transcription: ['openai', 'sandbox'],
  moderation: ['openai', 'sandbox'],
  rerank: ['cohere', 'openai', 'sandbox'],
};
/** The values of a model's `max_tokens_field`. */
export const OUTPUT_LIMIT_FIELDS: readonly OutputLimitField[] = ['max_tokens', 'max_completion_tokens'];
/** The upstream kinds that serve embeddings (SPEC §7c): the others have no embeddings API. */
export const EMBEDDING_PROVIDERS: readonly ModelProvider[] = ['openai', 'gemini', 'sandbox'];
/** The values of an upstream's `compaction`: svc synthesises it, or the upstream compacts natively. */
export const COMPACTION_MODES: readonly CompactionMode[] = ['svc', 'native'];
/** The upstream kinds that may compact natively (`compaction: native`): the Responses API's own. */
export const NATIVE_COMPACTION_PROVIDERS: readonly ModelConfig['provider'][] = ['openai-responses'];
