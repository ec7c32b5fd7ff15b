import type { CallContext } from 'nice-grpc-common';
import { createHash } from 'node:crypto';
import { CreateMediaResponse, type MediaServiceImplementation } from '../../gen/svc/core/v1/media';
import { createIdempotency, fingerprintOf, idempotencyDeps, type Codec, type Idempotency } from '../chat/idempotency';
import { requireModel } from '../auth/scope';
import type { CoreCallContext } from '../auth/types';
import type { MediaKind, ModelConfig } from '../config/types';
import type { CoreDeps } from '../deps';
import { invalidArgument, SvcError } from '../errors';
import { findModelOfKind } from '../models/catalog';
import { createMediaUpstream } from '../providers/media/registry';
import type { MediaProvider } from '../providers/media/types';
import { createUpstreamMetrics, type UpstreamMetrics } from '../upstreams/metrics';
import { createUpstreamRouter } from '../upstreams/router';
import { OPERATION_KIND, runMedia, type MediaOperation } from './runner';

type CoreExt = { svc: CoreCallContext };
type Context = CallContext & CoreExt;

/** MediaService (its upstream connections belong to the core's dispatcher, `deps.http`). */
export type MediaGrpcService = MediaServiceImplementation<CoreExt>;

const MEDIA_KINDS = new Set<string>(['image', 'speech', 'transcription', 'moderation', 'rerank']);

/**
 * The largest answer an Idempotency-Key keeps for its repeats (the store's column holds 16 MiB of
 * text; the JSON of an answer is a third larger than its bytes). A repeat of a call whose answer
 * was larger is not charged again either: it is refused, saying so.
 */
export const MAX_REPLAYED_BODY_BYTES = 8 * 1024 * 1024;

// A replay reports what the first call returned, but a cost of 0 and the balance now.
const codec: Codec<CreateMediaResponse> = {
  encode: (v) =>
    v.body.length > MAX_REPLAYED_BODY_BYTES
      ? { tooLarge: v.body.length }
      : (CreateMediaResponse.toJSON(v) as Record<string, unknown>),
  decode: (j) => {
    const tooLarge = (j as { tooLarge?: unknown } | null)?.tooLarge;
    if (typeof tooLarge === 'number')
      throw new SvcError(
        'idempotency_conflict',
        `This Idempotency-Key's first call succeeded and was charged once, but its answer (${tooLarge} bytes) is too large to be kept for repeats. Use a new key for a new call.`,
        { details: { reason: 'too_large_to_replay' } },
      );
    return CreateMediaResponse.fromJSON(j);
  },
  replayed: (v, replay) => ({
    ...v,
    ...(v.billing === undefined
      ? {}
      : { billing: { requestId: replay.requestId, cost: 0n, balanceAfter: replay.balance } }),
  }),
};

/**
 * One provider over a media model's upstreams: each call goes through the router (priorities,
 * weights, fallback and breakers as for chat), asking each upstream for its own `upstream_model`.
 */
function routedMediaProvider(
  model: ModelConfig,
  deps: Pick<CoreDeps, 'http'>,
  routing: Parameters<typeof createUpstreamRouter>[2],
): MediaProvider {
  const members = model.upstreams.map((config) => ({
    config,
    provider: { inner: createMediaUpstream(model, config, deps.http), upstreamModel: config.upstreamModel },
  }));
  const router = createUpstreamRouter(model, members, routing);
  const name = [...new Set(members.map((m) => m.provider.inner.name))].join('+');
  const missing = (kind: string): never => {
    throw new SvcError('internal', `an upstream of ${model.id} serves no ${kind}`);
  };
  return {
    name,
    image: (call, signal) =>
      router.call(
        (p) => (p.inner.image ?? missing('image')).call(p.inner, { ...call, model: p.upstreamModel }, signal),
        signal,
      ),
    speech: (call, signal) =>
      router.call(
        (p) => (p.inner.speech ?? missing('speech')).call(p.inner, { ...call, model: p.upstreamModel }, signal),
        signal,
      ),
    transcribe: (call, signal) =>
      router.call(
        (p) =>
          (p.inner.transcribe ?? missing('transcription')).call(p.inner, { ...call, model: p.upstreamModel }, signal),
        signal,
      ),
    moderate: (call, signal) =>
      router.call(
        (p) => (p.inner.moderate ?? missing('moderation')).call(p.inner, { ...call, model: p.upstreamModel }, signal),
        signal,
      ),
    rerank: (call, signal) =>
      router.call(
        (p) => (p.inner.rerank ?? missing('rerank')).call(p.inner, { ...call, model: p.upstreamModel }, signal),
        signal,
      ),
  };
}

/**
 * MediaService: the media routes of SPEC §14 on the configured media models, under the `chat`
 * scope, the key's model allow-list, rate limits and caps; each call held and settled once.
 */
export function createMediaGrpcService(
  deps: Pick<CoreDeps, 'config' | 'meter' | 'logger' | 'now' | 'http' | 'store' | 'wallet'>,
  shared: {
    readonly upstreamMetrics?: UpstreamMetrics;
    /** The core's one Idempotency-Key store; its own otherwise. */
    readonly idempotency?: Idempotency;
  } = {},
): MediaGrpcService {
  const idempotency = shared.idempotency ?? createIdempotency(idempotencyDeps(deps));
  const routing = {
    logger: deps.logger,
    metrics: shared.upstreamMetrics ?? createUpstreamMetrics(undefined),
    now: deps.now,
  };
  const providers = new Map<string, MediaProvider>();
  for (const model of deps.config.models.values())
    if (model.kind !== undefined && MEDIA_KINDS.has(model.kind))
      providers.set(model.id, routedMediaProvider(model, deps, routing));
  const runDeps = {
    meter: deps.meter,
    logger: deps.logger,
    ...(deps.config.limits.maxAudioSeconds === undefined
      ? {}
      : { maxAudioSeconds: deps.config.limits.maxAudioSeconds }),
    nowSeconds: () => Math.floor(deps.now() / 1000),
  };

  return {
    async createMedia(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      if (!(request.operation in OPERATION_KIND))
        throw new SvcError('not_found', `Unknown media operation '${request.operation}'.`);
      const operation = request.operation as MediaOperation;
      const kind: MediaKind = OPERATION_KIND[operation];
      let params: Record<string, unknown>;
      try {
        const parsed = JSON.parse(request.paramsJson === '' ? '{}' : request.paramsJson) as unknown;
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
        params = parsed as Record<string, unknown>;
      } catch {
        throw new SvcError('invalid_type', 'Invalid body: expected a JSON object.', { param: 'body' });
      }
      const name = params['model'];
      if (name === undefined || name === null || name === '')
        throw invalidArgument('model', `Missing required parameter: 'model'.`);
      if (typeof name !== 'string')
        throw new SvcError('invalid_type', `Invalid type for 'model': expected a string.`, { param: 'model' });
      const model = findModelOfKind(deps.config, name, kind);
      requireModel(principal, model.id, name);
      const provider = providers.get(model.id);
      if (provider === undefined) throw new SvcError('internal', `no media provider for model ${model.id}`);
      const files = request.files.map((f) => ({
        field: f.field,
        filename: f.filename,
        contentType: f.contentType,
        data: f.data,
      }));
      // What was asked, for an Idempotency-Key: the fields and each file's hash (not its bytes).
      const fingerprint = fingerprintOf('CreateMedia', () => ({
        operation,
        paramsJson: request.paramsJson,
        files: files.map((f) => ({
          field: f.field,
          filename: f.filename,
          contentType: f.contentType,
          sha256: createHash('sha256').update(f.data).digest('hex'),
        })),
      }));
      return idempotency.unary(
        principal,
        context.svc.requestId,
        context.svc.idempotencyKey,
        fingerprint,
        codec,
        async () => {
          const answer = await runMedia(runDeps, model, provider, operation, params, files, {
            principal,
            requestId: context.svc.requestId,
            clientRequestId: context.svc.clientRequestId,
            signal: context.signal,
          });
          return {
            body: Buffer.from(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength),
            contentType: answer.contentType,
            billing: answer.billing,
            estimated: answer.estimated,
            sandbox: model.upstreams.every((u) => u.provider === 'sandbox'),
            model: model.id,
            inputCharacters: BigInt(answer.inputCharacters),
          };
        },
      );
    },
  };
}
