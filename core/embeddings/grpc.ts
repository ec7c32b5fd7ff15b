import { requireModel } from '../auth/scope';
import type { CallContext } from 'nice-grpc-common';
import { EmbedRequest, EmbedResponse, type EmbeddingServiceImplementation } from '../../gen/svc/core/v1/embeddings';
import type { CoreCallContext } from '../auth/types';
import { createIdempotency, fingerprintOf, idempotencyDeps, type Codec, type Idempotency } from '../chat/idempotency';
import type { CoreDeps } from '../deps';
import { invalidArgument, SvcError } from '../errors';
import { findEmbeddingModel } from '../models/catalog';
import type { EmbeddingInputValue } from '../providers/llm/embeddings';
import { createEmbeddingUpstream } from '../providers/llm/embedding-registry';
import type { EmbeddingProvider } from '../providers/llm/embeddings';
import { createUpstreamMetrics, type UpstreamMetrics } from '../upstreams/metrics';
import { createUpstreamRouter } from '../upstreams/router';
import { prepareEmbedding, runEmbedding } from './runner';
import { createCreditCheck } from '../billing/admission';

type CoreExt = { svc: CoreCallContext };
type Context = CallContext & CoreExt;

/** EmbeddingService (its upstream connections belong to the core's dispatcher, `deps.http`). */
export type EmbeddingGrpcService = EmbeddingServiceImplementation<CoreExt>;

// A replay reports what the first call returned, but a cost of 0 and the balance now.
const codec: Codec<EmbedResponse> = {
  encode: (v) => EmbedResponse.toJSON(v),
  decode: (j) => EmbedResponse.fromJSON(j),
  replayed: (v, replay) => ({
    ...v,
    ...(v.usage === undefined ? {} : { usage: { ...v.usage, cost: 0n } }),
    ...(v.billing === undefined
      ? {}
      : { billing: { requestId: replay.requestId, cost: 0n, balanceAfter: replay.balance } }),
  }),
};

/**
 * EmbeddingService: vectors from the configured embedding models, billed like chat (hold, then
 * one settle), under the `chat` scope, the key's rate limits and caps; an `idempotency-key`
 * makes a retried call return the first result without a second charge.
 */
export function createEmbeddingGrpcService(
  deps: Pick<CoreDeps, 'config' | 'meter' | 'logger' | 'store' | 'wallet' | 'now' | 'http' | 'prices'>,
  shared: {
    /** The core's one Idempotency-Key store; its own otherwise. */
    readonly idempotency?: Idempotency;
    /** Where routing records attempts, fallbacks and breakers (the chat service's too); none otherwise. */
    readonly upstreamMetrics?: UpstreamMetrics;
  } = {},
): EmbeddingGrpcService {
  const routing = {
    logger: deps.logger,
    metrics: shared.upstreamMetrics ?? createUpstreamMetrics(undefined),
    now: deps.now,
    queues: deps.http.queues,
  };
  // One routed provider per embedding model over its upstreams (fallback and breakers as for
  // chat); the runner holds and settles once around the whole routed call.
  const providers = new Map<string, EmbeddingProvider>();
  for (const model of deps.config.models.values()) {
    if (model.kind !== 'embedding') continue;
    const members = model.upstreams.map((config) => ({
      config,
      provider: createEmbeddingUpstream(model, config, deps.http),
    }));
    const router = createUpstreamRouter(model, members, routing);
    const kinds = [...new Set(members.map((m) => m.provider.name))];
    providers.set(model.id, {
      name: kinds.join('+'),
      embed: (call, signal) => router.call((provider) => provider.embed(call, signal), signal),
    });
  }
  const idempotency = shared.idempotency ?? createIdempotency(idempotencyDeps(deps));
  const credit = createCreditCheck(deps.wallet);

  return {
    async embed(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      if (request.model === '') throw invalidArgument('model', `Missing required parameter: 'model'.`);
      // Priced now, once: the call settles at this price (SPEC §15).
      const model = await deps.prices.price(findEmbeddingModel(deps.config, request.model), principal.accountId);
      requireModel(principal, model.id, request.model);
      const provider = providers.get(model.id);
      if (provider === undefined) throw new SvcError('internal', `no embedding provider for model ${model.id}`);
      const inputs: EmbeddingInputValue[] = request.inputs.map((input, i) => {
        const value = input.input;
        if (value?.$case === 'text') return value.value;
        if (value?.$case === 'tokens') return value.value.ids.map(Number);
        throw invalidArgument(`input[${i}]`, `Invalid 'input[${i}]': expected a string or an array of token ids.`);
      });
      // Large texts are counted only for a wallet that covers the least the call can cost.
      const prepared = await prepareEmbedding(model, provider, inputs, request.dimensions, request.user, (least) =>
        credit(principal, least),
      );
      return idempotency.unary(
        principal,
        context.svc.requestId,
        context.svc.idempotencyKey,
        fingerprintOf('Embed', () => EmbedRequest.toJSON(request)),
        codec,
        async () => {
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
            usage: { promptTokens: tokens, totalTokens: tokens, cost: result.billing.cost, estimated: result.estimated },
            billing: result.billing,
            sandbox: model.provider === 'sandbox',
          };
        },
      );
    },
  };
}
