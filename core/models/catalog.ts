import type { ModelConfig, SvcConfig } from '../config/types';
import { invalidArgument, SvcError } from '../errors';
import type { Model } from '../../gen/svc/core/v1/models';

// The configuration carries no creation date; a fixed one keeps `created` stable across restarts.
const CATALOG_CREATED = 1735689600n;

/** The configured model with this public id; throws model_not_found (with no param, as OpenAI sends it). */
export function findModel(config: Pick<SvcConfig, 'models'>, id: string): ModelConfig {
  const model = config.models.get(id);
  if (model === undefined)
    throw new SvcError('model_not_found', `The model '${id}' does not exist or you do not have access to it.`);
  return model;
}

/** A configured chat model; an embedding model named here is a 400 naming `model`. */
export function findChatModel(config: Pick<SvcConfig, 'models'>, id: string): ModelConfig {
  const model = findModel(config, id);
  if (model.kind === 'embedding')
    throw invalidArgument(
      'model',
      `The model '${id}' is an embedding model: it serves the embeddings routes, not chat. Use a chat model.`,
    );
  return model;
}

/** A configured embedding model; a chat model named here is a 400 naming `model`. */
export function findEmbeddingModel(config: Pick<SvcConfig, 'models'>, id: string): ModelConfig {
  const model = findModel(config, id);
  if (model.kind !== 'embedding')
    throw invalidArgument(
      'model',
      `The model '${id}' is a chat model: it does not produce embeddings. Use an embedding model.`,
    );
  return model;
}

export function toProtoModel(model: ModelConfig): Model {
  return {
    id: model.id,
    created: CATALOG_CREATED,
    ownedBy: 'svc',
    contextWindow: BigInt(model.contextWindow),
    maxOutputTokens: BigInt(model.maxOutputTokens),
    price: { inputPer1m: model.price.inputPer1m, outputPer1m: model.price.outputPer1m, flat: 0n },
    sandbox: model.provider === 'sandbox',
  };
}
