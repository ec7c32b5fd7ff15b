import {
  ChannelCredentials,
  Channel as GrpcChannel,
  Client as GrpcClient,
  Metadata as GrpcMetadata,
  type ServiceError,
} from '@grpc/grpc-js';
import {
  ClientError,
  createClientFactory,
  Metadata,
  type CallOptions,
  type Channel,
  type Client,
  Status,
  type TsProtoServiceDefinition,
} from 'nice-grpc';
import { AbortError, isAbortError } from 'abort-controller-x';
import { AccountServiceDefinition } from '../../gen/svc/core/v1/accounts';
import { AuthServiceDefinition } from '../../gen/svc/core/v1/auth';
import { ChatServiceDefinition } from '../../gen/svc/core/v1/chat';
import { ConsoleServiceDefinition } from '../../gen/svc/core/v1/console';
import { EmbeddingServiceDefinition } from '../../gen/svc/core/v1/embeddings';
import { MediaServiceDefinition } from '../../gen/svc/core/v1/media';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { ModelServiceDefinition } from '../../gen/svc/core/v1/models';
import { OAuthServiceDefinition } from '../../gen/svc/core/v1/oauth';
import { PaymentServiceDefinition } from '../../gen/svc/core/v1/payments';
import { ToolServiceDefinition } from '../../gen/svc/core/v1/tools';
import { UsageServiceDefinition } from '../../gen/svc/core/v1/usage';
import { WalletServiceDefinition } from '../../gen/svc/core/v1/wallet';
import {
  errorFromTrailers,
  SvcError,
  CLIENT_REQUEST_ID,
  SESSION_ID_METADATA,
  STREAM_BATCH_HEADER,
  type InProcessChannel,
  type ServiceDefinitionLike,
} from '../../core/edge';
import { addCost, billingOf, outcomeReader, type CoreOutcome } from './core-outcome';
import {
  HealthCheckResponse_ServingStatus,
  HealthDefinition,
} from 'nice-grpc-server-health/lib/proto/grpc/health/v1/health';
import type { RequestIds } from './request';
import { createTunnels, type TunnelStats } from './tunnel';

/** How a gateway's calls reach the core. */
export interface ConnectOptions {
  /**
   * Tunnels to keep open (SVC_CORE_TUNNELS, default 0): every unary and server-streaming call is
   * a frame on one of them (`adapters/http/tunnel.ts`); 0: each call is a gRPC call of its own.
   */
  readonly tunnels?: number;
  /** How long a tunnel takes new calls before it is rotated (default 60 s; tests shorten it). */
  readonly tunnelMaxAgeMs?: number;
}

/**
 * Tunnels a gateway keeps open to its cores unless told otherwise: none yet. A core ends each
 * connection after ~5 minutes with a GOAWAY (so gateways find new cores), and grpc-js's keepalive
 * ping on such a closing connection destroys it, with every call still on it (Node's `ping()`
 * returns nothing on a closed session, which grpc-js reads as a failed ping): a tunnel lives long
 * enough to meet that ping (docs/architecture.md, "The gateway's tunnel").
 */
export const DEFAULT_TUNNELS = 0;

/** Typed clients of every core service, over one channel. */
export interface CoreClients {
  readonly accounts: Client<typeof AccountServiceDefinition>;
  readonly auth: Client<typeof AuthServiceDefinition>;
  readonly keys: Client<typeof KeyServiceDefinition>;
  readonly wallet: Client<typeof WalletServiceDefinition>;
  readonly models: Client<typeof ModelServiceDefinition>;
  readonly chat: Client<typeof ChatServiceDefinition>;
  readonly embeddings: Client<typeof EmbeddingServiceDefinition>;
  readonly media: Client<typeof MediaServiceDefinition>;
  readonly tools: Client<typeof ToolServiceDefinition>;
  readonly console: Client<typeof ConsoleServiceDefinition>;
  readonly usage: Client<typeof UsageServiceDefinition>;
  readonly oauth: Client<typeof OAuthServiceDefinition>;
  readonly payments: Client<typeof PaymentServiceDefinition>;
}

export interface CoreConnection {
  readonly clients: CoreClients;
  /** How the adapters reach the core: a gRPC channel, or the in-process channel of `svc serve`. */
  readonly transport: 'grpc' | 'in-process';
  /** What the tunnels carried (gRPC with SVC_CORE_TUNNELS above 0 only). */
  readonly tunnelStats?: () => TunnelStats;
  /** Whether the core answers and serves (the gateway's `/readyz`). */
  ready(signal: AbortSignal): Promise<boolean>;
  close(): void;
}

// A gRPC target that names its resolver already (grpc-js: `ipv4:A:P,B:P`, `dns:NAME:P`, `unix:PATH`).
const RESOLVER = /^(dns|ipv4|ipv6|unix|unix-abstract):/;

/**
 * Connects to the core at `address` (HOST:PORT, unix:PATH, or a grpc-js target such as
 * `ipv4:10.0.0.1:50051,10.0.0.2:50051`). Calls are spread round-robin over every address the name
 * resolves to, so a gateway behind a DNS name with one record per core (a Kubernetes headless
 * Service) uses every core; the cores end each connection after a few minutes
 * (`grpc.max_connection_age_ms`), and the name is resolved again then, so cores added later are
 * found.
 */
export function connectCore(address: string, options: ConnectOptions = {}): CoreConnection {
  // grpc-js targets directly: nice-grpc's createChannel would read `unix:PATH` as a host and
  // append a port to it.
  const target = RESOLVER.test(address) ? address : `dns:${address}`;
  const channel: Channel = new GrpcChannel(target, ChannelCredentials.createInsecure(), {
    // pick_first (grpc's default) would send every call to the first address that connected.
    'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    // No per-call channelz bookkeeping: nothing reads it, and it is on every call's path.
    'grpc.enable_channelz': 0,
    // A core that restarts (a deploy, a crash) is found again within ~2 s: the default backoff
    // grows to 120 s, leaving a gateway failing every call long after its core is back.
    'grpc.initial_reconnect_backoff_ms': 250,
    'grpc.max_reconnect_backoff_ms': 2_000,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
  });
  const factory = createClientFactory();
  // Unary calls straight on grpc-js (`direct`), streams through nice-grpc: over the same channel.
  const grpc = new GrpcClient(target, ChannelCredentials.createInsecure(), { channelOverride: channel as GrpcChannel });
  const count = options.tunnels ?? DEFAULT_TUNNELS;
  const tunnels =
    count > 0
      ? createTunnels(grpc, {
          count,
          ...(options.tunnelMaxAgeMs === undefined ? {} : { maxAgeMs: options.tunnelMaxAgeMs }),
        })
      : undefined;
  const createClient = <D extends TsProtoServiceDefinition>(definition: D, on: Channel): Client<D> => {
    const client = direct(definition, factory.create(definition, on), grpc);
    return tunnels === undefined ? client : tunnels.client(definition, client);
  };
  const clients: CoreClients = {
    accounts: createClient(AccountServiceDefinition, channel),
    auth: createClient(AuthServiceDefinition, channel),
    keys: createClient(KeyServiceDefinition, channel),
    wallet: createClient(WalletServiceDefinition, channel),
    models: createClient(ModelServiceDefinition, channel),
    chat: batchedChat(createClient(ChatServiceDefinition, channel)),
    embeddings: createClient(EmbeddingServiceDefinition, channel),
    media: createClient(MediaServiceDefinition, channel),
    tools: createClient(ToolServiceDefinition, channel),
    console: createClient(ConsoleServiceDefinition, channel),
    usage: createClient(UsageServiceDefinition, channel),
    oauth: createClient(OAuthServiceDefinition, channel),
    payments: createClient(PaymentServiceDefinition, channel),
  };
  const health = factory.create(HealthDefinition, channel);
  return {
    clients,
    transport: 'grpc',
    ...(tunnels === undefined ? {} : { tunnelStats: () => tunnels.stats() }),
    // `svc.ready` also asks the core's store; a core older than it knows only ''.
    ready: async (signal) => {
      const answer = await health.check({ service: 'svc.ready' }, { signal }).catch((error: unknown) => {
        if (error instanceof ClientError && error.code === Status.NOT_FOUND)
          return health.check({ service: '' }, { signal });
        throw error;
      });
      return answer.status === HealthCheckResponse_ServingStatus.SERVING;
    },
    // The grpc-js client is over this channel: closing it closes both.
    close: () => {
      tunnels?.close();
      channel.close();
    },
  };
}

/** What a unary method of a ts-proto service definition needs to be called on grpc-js. */
interface MessageFns {
  encode(message: never): { finish(): Uint8Array };
  fromPartial?: (object: never) => unknown;
  decode(input: Uint8Array): unknown;
}

function nice(metadata: GrpcMetadata): Metadata {
  const converted = Metadata();
  for (const key of Object.keys(metadata.getMap())) converted.set(key, metadata.get(key) as string[]);
  return converted;
}

/**
 * One unary method called on grpc-js directly: what nice-grpc's client does (the request completed
 * by `fromPartial` and encoded, the metadata converted both ways, a failed status as its
 * ClientError, an aborted signal cancelling the call and rejecting with an AbortError, the header
 * and trailer handed to `onHeader` and `onTrailer`), without its per-call layers: an async
 * generator driven by a loop, an AbortController when the caller gave no signal, a promise
 * wrapper around the call, and a second copy of the encoded request. The bytes encoded are
 * wrapped, not copied.
 */
function unaryMethod(
  grpc: GrpcClient,
  path: string,
  requestType: MessageFns,
  responseType: MessageFns,
): (request: unknown, options?: CallOptions) => Promise<unknown> {
  const fromPartial = requestType.fromPartial;
  const serialize = (value: unknown): Buffer => {
    const bytes = requestType
      .encode((fromPartial === undefined ? value : fromPartial(value as never)) as never)
      .finish();
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
  const deserialize = (bytes: Buffer): unknown => responseType.decode(bytes);
  return (request, options = {}) =>
    new Promise((resolve, reject) => {
      const { signal, onHeader, onTrailer } = options;
      if (signal?.aborted === true) {
        reject(new AbortError());
        return;
      }
      const metadata = new GrpcMetadata();
      if (options.metadata !== undefined)
        for (const [key, values] of options.metadata)
          for (const value of values) metadata.add(key, typeof value === 'string' ? value : Buffer.from(value));
      let abort: (() => void) | undefined;
      const call = grpc.makeUnaryRequest(path, serialize, deserialize, request, metadata, (error, response) => {
        if (abort !== undefined) signal?.removeEventListener('abort', abort);
        if (error === null) resolve(response);
        else reject(isStatus(error) ? new ClientError(path, error.code, error.details) : error);
      });
      if (onHeader !== undefined) call.on('metadata', (header: GrpcMetadata) => onHeader(nice(header)));
      if (onTrailer !== undefined)
        call.on('status', (status: { metadata: GrpcMetadata }) => onTrailer(nice(status.metadata)));
      if (signal !== undefined) {
        abort = () => {
          call.cancel();
          reject(new AbortError());
        };
        signal.addEventListener('abort', abort, { once: true });
      }
    });
}

function isStatus(error: ServiceError | null): error is ServiceError {
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof error.code === 'number' &&
    typeof error.details === 'string' &&
    error.metadata instanceof GrpcMetadata
  );
}

/** `client` (nice-grpc's) with its unary methods called on grpc-js directly (`unaryMethod`); streams stay nice-grpc's. */
function direct<D extends TsProtoServiceDefinition>(definition: D, client: Client<D>, grpc: GrpcClient): Client<D> {
  const methods: Record<string, unknown> = { ...client };
  for (const [name, method] of Object.entries(definition.methods)) {
    if (method.requestStream || method.responseStream) continue;
    methods[name] = unaryMethod(
      grpc,
      `/${definition.fullName}/${method.name}`,
      method.requestType as MessageFns,
      method.responseType as MessageFns,
    );
  }
  return methods as Client<D>;
}

/** The call's metadata with the ask for batched stream messages added. */
function askBatches(options: CallOptions | undefined): CallOptions {
  const metadata = Metadata(options?.metadata);
  metadata.set(STREAM_BATCH_HEADER, '1');
  return { ...options, metadata };
}

/** Each message of a batched stream as the messages it stands for: one item each, the billing on the last. */
async function* unbatched<M extends { billing?: unknown }, I>(
  source: AsyncIterable<M>,
  single: (m: M) => I | undefined,
  many: (m: M) => readonly I[],
  make: (item: I, billing: M['billing'] | undefined) => M,
): AsyncGenerator<M> {
  for await (const message of source) {
    const items = many(message);
    if (items.length === 0 || single(message) !== undefined) {
      yield message;
      continue;
    }
    const last = items.length - 1;
    for (let i = 0; i < last; i++) yield make(items[i] as I, undefined);
    yield make(items[last] as I, message.billing);
  }
}

/**
 * The chat client over gRPC, asking the core for batched stream messages (several chunks or
 * events per message when several are ready at once, `x-svc-stream-batch`) and handing the
 * adapters one chunk or event per message, as an older core that does not batch sends them.
 */
function batchedChat(client: Client<typeof ChatServiceDefinition>): Client<typeof ChatServiceDefinition> {
  return {
    ...client,
    streamChatCompletion: (request, options) =>
      unbatched(
        client.streamChatCompletion(request, askBatches(options)),
        (m) => m.chunk,
        (m) => m.chunks,
        (chunk, billing) =>
          billing === undefined
            ? { chunk, chunks: [], data: [], dataEvents: [] }
            : { chunk, billing, chunks: [], data: [], dataEvents: [] },
      ),
    streamResponse: (request, options) =>
      unbatched(
        client.streamResponse(request, askBatches(options)),
        (m) => m.event,
        (m) => m.events,
        (event, billing) =>
          billing === undefined
            ? { event, events: [], data: [], dataEvents: [] }
            : { event, billing, events: [], data: [], dataEvents: [] },
      ),
  };
}

/**
 * Clients that call the core's services in this process (`svc serve`): the same middleware and
 * semantics as over gRPC, without the HTTP/2 hop and the protobuf encoding.
 */
export function connectInProcess(
  channel: InProcessChannel,
  /** Whether the core in this process serves (its store answers); default: always. */
  ready: () => Promise<boolean> = () => Promise.resolve(true),
): CoreConnection {
  const client = <D extends ServiceDefinitionLike & TsProtoServiceDefinition>(definition: D): Client<D> =>
    channel.client(definition) as Client<D>;
  const clients: CoreClients = {
    accounts: client(AccountServiceDefinition),
    auth: client(AuthServiceDefinition),
    keys: client(KeyServiceDefinition),
    wallet: client(WalletServiceDefinition),
    models: client(ModelServiceDefinition),
    chat: client(ChatServiceDefinition),
    embeddings: client(EmbeddingServiceDefinition),
    media: client(MediaServiceDefinition),
    tools: client(ToolServiceDefinition),
    console: client(ConsoleServiceDefinition),
    usage: client(UsageServiceDefinition),
    oauth: client(OAuthServiceDefinition),
    payments: client(PaymentServiceDefinition),
  };
  return { clients, transport: 'in-process', ready, close: () => undefined };
}

/** What an adapter forwards from the HTTP request to the core. */
export interface CallMeta {
  /** The client's Authorization header, verbatim (the core authenticates). */
  readonly authorization: string | undefined;
  /** The request's ids: the client's is forwarded for correlation, the core's minted one adopted. */
  readonly ids: RequestIds;
  readonly idempotencyKey?: string | undefined;
  /**
   * The client's session id (Claude Code's `X-Claude-Code-Session-Id`, Codex's `session_id`;
   * `clientSessionId`): a cache routing hint for the core (SPEC §13), nothing more.
   */
  readonly sessionId?: string | undefined;
  /** Aborted when the HTTP client goes away; cancels the gRPC call and the upstream request. */
  readonly signal?: AbortSignal | undefined;
  /** Receives the core's response headers (e.g. the x-ratelimit-* state of the key). */
  readonly onHeader?: ((header: Metadata) => void) | undefined;
  /** The HTTP request's record for the request log (`outcomeOf(ctx.req)`): filled from the core's outcome metadata. */
  readonly outcome?: CoreOutcome | undefined;
  /** The console adapter's proof of itself, so the core believes the browser address it states. */
  readonly adapterToken?: string | undefined;
}

function buildOptions(meta: CallMeta, onTrailer: (t: Metadata) => void): CallOptions {
  const metadata = new Metadata();
  if (meta.authorization !== undefined) metadata.set('authorization', meta.authorization);
  const { ids, onHeader, outcome } = meta;
  if (ids.client !== undefined) metadata.set(CLIENT_REQUEST_ID, ids.client);
  if (meta.idempotencyKey !== undefined) metadata.set('idempotency-key', meta.idempotencyKey);
  if (meta.sessionId !== undefined) metadata.set(SESSION_ID_METADATA, meta.sessionId);
  if (meta.adapterToken !== undefined) metadata.set('x-svc-adapter-token', meta.adapterToken);
  const read = outcome === undefined ? undefined : outcomeReader(outcome);
  const adopt = (m: Metadata): void => {
    const id = m.get('x-request-id');
    if (typeof id === 'string') ids.adopt(id);
  };
  return {
    metadata,
    onTrailer: (trailer) => {
      adopt(trailer);
      read?.(trailer);
      onTrailer(trailer);
    },
    ...(meta.signal !== undefined ? { signal: meta.signal } : {}),
    onHeader: (header: Metadata) => {
      adopt(header);
      read?.(header);
      onHeader?.(header);
    },
  };
}

function translate(error: unknown, trailer: Metadata | undefined): unknown {
  if (error instanceof ClientError) return errorFromTrailers(error.code, error.details, trailer);
  if (isAbortError(error)) return new SvcError('cancelled', 'The request was cancelled');
  return error;
}

/**
 * Makes one unary core call with the request's metadata; a failure is rethrown as the core's
 * SvcError (code, param and details rebuilt from the trailers). The response's billing, if any,
 * is added to the request's record.
 */
export async function callCore<T>(meta: CallMeta, call: (options: CallOptions) => Promise<T>): Promise<T> {
  let trailer: Metadata | undefined;
  let response: T;
  try {
    response = await call(buildOptions(meta, (t) => (trailer = t)));
  } catch (error) {
    throw translate(error, trailer);
  }
  addCost(meta.outcome, billingOf(response));
  return response;
}

/**
 * The streaming counterpart of `callCore`. Leaving the loop early cancels the call. The billing
 * of the last message that carries one is the stream's cost.
 */
export async function* streamCore<T>(
  meta: CallMeta,
  call: (options: CallOptions) => AsyncIterable<T>,
): AsyncGenerator<T> {
  let trailer: Metadata | undefined;
  let billing: ReturnType<typeof billingOf>;
  try {
    for await (const message of call(buildOptions(meta, (t) => (trailer = t)))) {
      billing = billingOf(message) ?? billing;
      yield message;
    }
  } catch (error) {
    throw translate(error, trailer);
  } finally {
    addCost(meta.outcome, billing);
  }
}

/**
 * The session id a coding client sends with every request of a session (Claude Code's
 * `X-Claude-Code-Session-Id`, Codex's `session_id`), for the core's cache routing (SPEC §13);
 * undefined when it sent none or one that is not a plain token.
 */
export function clientSessionId(get: (name: string) => string): string | undefined {
  const id = get('x-claude-code-session-id') || get('session_id') || get('session-id');
  return /^[A-Za-z0-9._:-]{1,128}$/.test(id) ? id : undefined;
}
