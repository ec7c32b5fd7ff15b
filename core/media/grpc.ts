import type { CallContext } from 'nice-grpc-common';
import {
  CreateMediaResponse,
  UploadMediaResponse,
  type MediaServiceImplementation,
} from '../../gen/svc/core/v1/media';
import { createIdempotency, fingerprintOf, idempotencyDeps, type Codec, type Idempotency } from '../chat/idempotency';
import { requireModel } from '../auth/scope';
import type { CoreCallContext, Principal } from '../auth/types';
import type { MediaKind, ModelConfig } from '../config/types';
import type { CoreDeps } from '../deps';
import { invalidArgument, SvcError } from '../errors';
import { findModelOfKind } from '../models/catalog';
import { createMediaUpstream } from '../providers/media/registry';
import type { MediaProvider, NativeRequest, TranscriptionResult } from '../providers/media/types';
import { createUpstreamMetrics, type UpstreamMetrics } from '../upstreams/metrics';
import { createUpstreamRouter } from '../upstreams/router';
import { OPERATION_KIND, runMedia, type MediaOperation } from './runner';
import { createUploadSpool, DEFAULT_MAX_UPLOAD_BYTES, type SpooledFile } from './spool';

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

interface TranscriptItem {
  readonly delta?: Record<string, unknown>;
  readonly result?: TranscriptionResult;
}

/**
 * The items `produce` pushes, as an async iterable, ending when its promise settles (its error
 * thrown after the items before it).
 */
async function* pushed<T>(produce: (push: (item: T) => void) => Promise<void>): AsyncGenerator<T> {
  const queue: T[] = [];
  let wake: (() => void) | undefined;
  let settled = false;
  let failure: { error: unknown } | undefined;
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  void produce((item) => {
    queue.push(item);
    notify();
  }).then(
    () => {
      settled = true;
      notify();
    },
    (error: unknown) => {
      failure = { error };
      settled = true;
      notify();
    },
  );
  for (;;) {
    const item = queue.shift();
    if (item !== undefined) {
      yield item;
      continue;
    }
    if (settled) {
      if (failure !== undefined) throw failure.error;
      return;
    }
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
  }
}

// An upload's answer kept for an Idempotency-Key's repeats: each event, the last with the answer.
const uploadCodec: Codec<UploadMediaResponse> = {
  encode: (v) =>
    v.done !== undefined && v.done.body.length > MAX_REPLAYED_BODY_BYTES
      ? { tooLarge: v.done.body.length }
      : (UploadMediaResponse.toJSON(v) as Record<string, unknown>),
  decode: (j) => {
    const tooLarge = (j as { tooLarge?: unknown } | null)?.tooLarge;
    if (typeof tooLarge === 'number') return { eventJson: '', done: codec.decode(j) };
    return UploadMediaResponse.fromJSON(j);
  },
  replayed: (v, replay) => (v.done === undefined ? v : { ...v, done: codec.replayed(v.done, replay) }),
};

/**
 * One provider over a media model's upstreams: each call goes through the router (priorities,
 * weights, fallback and breakers as for chat), asking each upstream for its own `upstream_model`.
 */
export function routedMediaProvider(
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
    transcribeStream: async (call, signal, onDelta) => {
      // Through the router's stream: an upstream that fails before its first event falls back to
      // the next; after it, the client has text already and the failure is the call's.
      let result: TranscriptionResult | undefined;
      for await (const item of router.stream(
        (p) =>
          pushed<TranscriptItem>((push) => {
            const args = { ...call, model: p.upstreamModel };
            const run =
              p.inner.transcribeStream === undefined
                ? (p.inner.transcribe ?? missing('transcription'))
                    .call(p.inner, args, signal)
                    .then((r) => {
                      const text = r.json['text'];
                      if (typeof text === 'string' && text !== '')
                        push({ delta: { type: 'transcript.text.delta', delta: text } });
                      return r;
                    })
                : p.inner.transcribeStream.call(p.inner, args, signal, (delta) => push({ delta }));
            return run.then((r) => push({ result: r }));
          }),
        signal,
      )) {
        if (item.delta !== undefined) onDelta(item.delta);
        if (item.result !== undefined) result = item.result;
      }
      if (result === undefined) throw new SvcError('internal', `${model.id}: a transcription stream ended without its result`);
      return result;
    },
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
  deps: Pick<CoreDeps, 'config' | 'meter' | 'logger' | 'now' | 'http' | 'store' | 'wallet' | 'prices'>,
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

  const maxUploadBytes = deps.config.limits.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;

  /** The call's operation, fields and model, checked before anything is held. */
  function resolve(operationName: string, paramsJson: string, principal: Principal) {
    if (!(operationName in OPERATION_KIND))
      throw new SvcError('not_found', `Unknown media operation '${operationName}'.`);
    const operation = operationName as MediaOperation;
    const kind: MediaKind = OPERATION_KIND[operation];
    let params: Record<string, unknown>;
    try {
      const parsed = JSON.parse(paramsJson === '' ? '{}' : paramsJson) as unknown;
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
    return { operation, params, model, provider };
  }

  /**
   * The client's own request on another wire, for an image or speech model asked on the Gemini
   * API (pass-through to a Gemini upstream); absent when none was given.
   */
  function nativeOf(
    operation: MediaOperation,
    wire: string | undefined,
    bodyJson: string | undefined,
  ): NativeRequest | undefined {
    // An in-process caller may leave the fields out altogether.
    if (wire === undefined || wire === '') return undefined;
    const kind = OPERATION_KIND[operation];
    if (wire !== 'gemini' || (kind !== 'image' && kind !== 'speech'))
      throw invalidArgument('native_wire', `Unsupported native wire '${wire}' for ${operation}.`);
    let body: unknown;
    try {
      body = JSON.parse(bodyJson ?? '');
    } catch {
      body = undefined;
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new SvcError('invalid_type', 'Invalid native body: expected a JSON object.', { param: 'body' });
    return { wire, body: body as Record<string, unknown> };
  }

  /** What was asked, for an Idempotency-Key: the fields and each file's hash (not its bytes). */
  function fingerprint(operation: string, paramsJson: string, files: readonly SpooledFile[], nativeJson = '') {
    return fingerprintOf('CreateMedia', () => ({
      operation,
      paramsJson,
      ...(nativeJson === '' ? {} : { nativeJson }),
      files: files.map((f) => ({ field: f.field, filename: f.filename, contentType: f.contentType, sha256: f.sha256 })),
    }));
  }

  async function answer(
    resolved: ReturnType<typeof resolve>,
    files: readonly SpooledFile[],
    principal: Principal,
    context: Context,
    onEvent?: (event: Record<string, unknown>) => void,
    native?: NativeRequest,
  ): Promise<CreateMediaResponse> {
    const { provider, operation, params } = resolved;
    // Priced at admission (SPEC §15): a dollar-priced model at the rate and margin in force now;
    // the call holds and settles at that price whatever the rate does meanwhile.
    const model = await deps.prices.price(resolved.model, principal.accountId);
    const result = await runMedia(runDeps, model, provider, operation, params, files, {
      principal,
      requestId: context.svc.requestId,
      clientRequestId: context.svc.clientRequestId,
      signal: context.signal,
      ...(onEvent === undefined ? {} : { onEvent }),
      ...(native === undefined ? {} : { native }),
    });
    return {
      body: Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength),
      contentType: result.contentType,
      billing: result.billing,
      estimated: result.estimated,
      sandbox: model.upstreams.every((u) => u.provider === 'sandbox'),
      model: model.id,
      inputCharacters: BigInt(result.inputCharacters),
      native: result.native,
    };
  }

  return {
    async createMedia(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      const resolved = resolve(request.operation, request.paramsJson, principal);
      const native = nativeOf(resolved.operation, request.nativeWire, request.nativeBodyJson);
      // Files given whole in the request (a gRPC caller's) wait on disk like streamed ones.
      const spool = createUploadSpool(maxUploadBytes);
      try {
        for (const f of request.files) {
          await spool.begin(f.field, f.filename, f.contentType);
          await spool.write(f.data);
        }
        const files = await spool.finish();
        return await idempotency.unary(
          principal,
          context.svc.requestId,
          context.svc.idempotencyKey,
          fingerprint(resolved.operation, request.paramsJson, files, native === undefined ? '' : (request.nativeBodyJson ?? '')),
          codec,
          () => answer(resolved, files, principal, context, undefined, native),
        );
      } finally {
        await spool.close();
      }
    },

    async *uploadMedia(parts, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      const spool = createUploadSpool(maxUploadBytes);
      try {
        let operation: string | undefined;
        const fields: Record<string, unknown> = {};
        for await (const part of parts) {
          if (operation === undefined) {
            if (part.operation === '')
              throw invalidArgument('body', 'Invalid upload: its first part names no operation.');
            operation = part.operation;
          }
          if (part.fieldsJson !== '') mergeFields(fields, part.fieldsJson);
          if (part.file !== undefined) await spool.begin(part.file.field, part.file.filename, part.file.contentType);
          if (part.chunk.length > 0) await spool.write(part.chunk);
        }
        if (operation === undefined) throw invalidArgument('body', 'Invalid upload: no parts.');
        const files = await spool.finish();
        const paramsJson = JSON.stringify(fields);
        const resolved = resolve(operation, paramsJson, principal);
        const stream = idempotency.stream(
          principal,
          context.svc.requestId,
          context.svc.idempotencyKey,
          fingerprint(resolved.operation, paramsJson, files),
          uploadCodec,
          () =>
            pushed<UploadMediaResponse>(async (push) => {
              const done = await answer(resolved, files, principal, context, (event) =>
                push({ eventJson: JSON.stringify(event) }),
              );
              // A streamed transcription's answer is its `transcript.text.done`, an event too.
              const streamed = done.contentType === 'text/event-stream';
              push({
                eventJson: streamed ? Buffer.from(done.body).toString('utf8') : '',
                done: streamed ? { ...done, body: Buffer.alloc(0) } : done,
              });
            }),
        );
        yield* stream;
      } finally {
        await spool.close();
      }
    },
  };
}

/** A form's text fields merged in: a later value replaces, arrays (`name[]` fields) append. */
function mergeFields(into: Record<string, unknown>, json: string): void {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw invalidArgument('body', 'Invalid upload: its fields are not JSON.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalidArgument('body', 'Invalid upload: its fields are not a JSON object.');
  for (const [name, field] of Object.entries(value as Record<string, unknown>)) {
    const before = into[name];
    into[name] = Array.isArray(field) && Array.isArray(before) ? [...(before as unknown[]), ...field] : field;
  }
}
