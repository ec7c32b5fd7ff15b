import type { ModelConfig, ModelKind, SvcConfig } from '../config/types';
import { SvcError } from '../errors';
import { didYouMean } from '../text/suggest';
import type { Model, UnitPrice } from '../../gen/svc/core/v1/models';

// The configuration carries no creation date; a fixed one keeps `created` stable across restarts.
const CATALOG_CREATED = 1735689600n;

// Alias → model, built once per configuration (the loader has made every name unique).
const aliasIndex = new WeakMap<ReadonlyMap<string, ModelConfig>, ReadonlyMap<string, ModelConfig>>();

function aliasesOf(models: ReadonlyMap<string, ModelConfig>): ReadonlyMap<string, ModelConfig> {
  let index = aliasIndex.get(models);
  if (index === undefined) {
    const built = new Map<string, ModelConfig>();
    for (const model of models.values()) for (const alias of model.aliases) built.set(alias, model);
    aliasIndex.set(models, built);
    index = built;
  }
  return index;
}

/**
 * The configured model with this public id or alias; throws model_not_found (with no param, as
 * OpenAI sends it). An alias resolves to its model: the answer, the usage record and the price are
 * the model's, under its id (as OpenAI and Anthropic answer an alias with the model it names).
 */
export function findModel(config: Pick<SvcConfig, 'models'>, id: string): ModelConfig {
  const model = config.models.get(id) ?? aliasesOf(config.models).get(id);
  if (model === undefined) {
    const names = listModelNames(config).map((entry) => entry.name);
    throw new SvcError(
      'model_not_found',
      `The model '${id}' does not exist or you do not have access to it.${didYouMean(id, names)}`,
    );
  }
  return model;
}

/** Every public name of the configured models (ids, then their aliases), with its model. */
export function listModelNames(config: Pick<SvcConfig, 'models'>): { name: string; model: ModelConfig }[] {
  const names: { name: string; model: ModelConfig }[] = [];
  for (const model of config.models.values()) {
    names.push({ name: model.id, model });
    for (const alias of model.aliases) names.push({ name: alias, model });
  }
  return names;
}

// What each kind of model is, in the words of a refusal.
const KIND_WORDS: Readonly<Record<ModelKind, string>> = {
  chat: 'a chat model',
  embedding: 'an embedding model',
  image: 'an image model',
  speech: 'a speech model',
  transcription: 'a transcription model',
  moderation: 'a moderation model',
  rerank: 'a rerank model',
};

const KIND_ROUTES: Readonly<Record<ModelKind, string>> = {
  chat: 'the chat routes',
  embedding: 'the embeddings routes',
  image: "the images routes and the Gemini API's generateContent",
  speech: "/audio/speech and the Gemini API's generateContent",
  transcription: '/audio/transcriptions and /audio/translations',
  moderation: '/moderations',
  rerank: '/rerank',
};

/**
 * A configured model of this kind; a model of another kind is a 400 naming `model` (SPEC §14),
 * saying which routes it serves.
 */
export function findModelOfKind(config: Pick<SvcConfig, 'models'>, id: string, kind: ModelKind): ModelConfig {
  const model = findModel(config, id);
  const has = model.kind ?? 'chat';
  if (has !== kind)
    throw new SvcError(
      'invalid_argument',
      `The model '${id}' is ${KIND_WORDS[has]}: it serves ${KIND_ROUTES[has]}, not this route. Use ${KIND_WORDS[kind]}.`,
      // The kind it is: an adapter whose one route serves several kinds (the Gemini API's
      // generateContent) asks the service of that kind instead.
      { param: 'model', details: { model_kind: has } },
    );
  return model;
}

/** A configured chat model; a model of another kind named here is a 400 naming `model`. */
export function findChatModel(config: Pick<SvcConfig, 'models'>, id: string): ModelConfig {
  return findModelOfKind(config, id, 'chat');
}

/** A configured embedding model; a model of another kind named here is a 400 naming `model`. */
export function findEmbeddingModel(config: Pick<SvcConfig, 'models'>, id: string): ModelConfig {
  return findModelOfKind(config, id, 'embedding');
}

/** The proto `Model` of `model` under `name` (its id, or an alias a client listed or asked for). */
export function toProtoModel(model: ModelConfig, name: string = model.id): Model {
  return {
    id: name,
    created: CATALOG_CREATED,
    ownedBy: 'svc',
    contextWindow: BigInt(model.contextWindow),
    maxOutputTokens: BigInt(model.maxOutputTokens),
    price: { inputPer1m: model.price.inputPer1m, outputPer1m: model.price.outputPer1m, flat: 0n, cap: 0n },
    sandbox: model.upstreams.every((upstream) => upstream.provider === 'sandbox'),
    aliasOf: name === model.id ? '' : model.id,
    kind: model.kind ?? 'chat',
    unitPrices: unitPricesOf(model),
  };
}

/** A media model's unit prices (SPEC §14), as the Prices page lists them. */
function unitPricesOf(model: ModelConfig): UnitPrice[] {
  const price = model.mediaPrice;
  if (price === undefined) return [];
  switch (price.form) {
    case 'per_image':
      return [...price.perImage].map(([key, credits]) => {
        const at = key.indexOf('/');
        return { credits, per: 'image', size: key.slice(0, at), quality: key.slice(at + 1) };
      });
    case 'per_1m_characters':
      return [{ credits: price.credits, per: '1m_characters', size: '', quality: '' }];
    case 'per_minute':
      return [{ credits: price.credits, per: 'minute', size: '', quality: '' }];
    case 'per_search':
      return [{ credits: price.credits, per: 'search', size: '', quality: '' }];
    case 'free':
    case 'tokens':
      return [];
  }
}
