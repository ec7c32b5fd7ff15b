import type { CallContext } from 'nice-grpc-common';
import type { EmbeddingServiceImplementation } from '../../gen/svc/core/v1/embeddings';
import type { CoreCallContext } from '../auth/types';
import type { CoreDeps } from '../deps';
import { invalidArgument, SvcError } from '../errors';
import { findEmbeddingModel } from '../models/catalog';
import type { EmbeddingInputValue } from '../providers/llm/embeddings';
import { createEmbeddingProviders } from '../providers/llm/embedding-registry';
import { createUpstreamPools, type UpstreamPools } from '../providers/llm/pools';
import { prepareEmbedding, runEmbedding } from './runner';

type CoreExt = { svc: CoreCallContext };
type Context = CallContext & CoreExt;

export interface EmbeddingGrpcOptions {
  /** Upstream connection pools; by default the service creates its own and closes them in `close()`. */
  readonly pools?: UpstreamPools;
}

/** EmbeddingService plus the release of its upstream connections. */
export type EmbeddingGrpcService = EmbeddingServiceImplementation<CoreExt> & { close(): Promise<void> };

/**
 * EmbeddingService: vectors from the configured embedding models, billed like chat (hold, then
 * one settle), under the `chat` scope, the key's rate limits and caps.
 */
export function createEmbeddingGrpcService(
  deps: Pick<CoreDeps, 'config' | 'meter' | 'logger'>,
  options: EmbeddingGrpcOptions = {},
): EmbeddingGrpcService {
  const pools = options.pools ?? createUpstreamPools();
  const providers = createEmbeddingProviders(deps.config.models, pools);

  return {
    async embed(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      if (request.model === '') throw invalidArgument('model', `Missing required parameter: 'model'.`);
      const model = findEmbeddingModel(deps.config, request.model);
      const provider = providers.get(model.id);
      if (provider === undefined) throw new SvcError('internal', `no embedding provider for model ${model.id}`);
      const inputs: EmbeddingInputValue[] = request.inputs.map((input, i) => {
        const value = input.input;
        if (value?.$case === 'text') return value.value;
        if (value?.$case === 'tokens') return value.value.ids.map(Number);
        throw invalidArgument(`input[${i}]`, `Invalid 'input[${i}]': expected a string or an array of token ids.`);
      });
      const prepared = prepareEmbedding(model, provider, inputs, request.dimensions, request.user);
      const result = await runEmbedding(deps, prepared, {
        principal,
        requestId: context.svc.requestId,
        clientRequestId: context.svc.clientRequestId,
        signal: context.signal,
      });
      const tokens = BigInt(result.promptTokens);
      return {
        embeddings: result.vectors.map((values) => ({ values })),
        model: model.id,
        usage: { promptTokens: tokens, totalTokens: tokens, cost: result.billing.cost },
        billing: result.billing,
        sandbox: model.provider === 'sandbox',
      };
    },

    async close() {
      await pools.close();
    },
  };
}
