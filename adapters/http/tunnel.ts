import { context as otelContext, propagation, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { Metadata as GrpcMetadata, type Client as GrpcClient, type ClientDuplexStream } from '@grpc/grpc-js';
import { AbortError } from 'abort-controller-x';
import { ClientError, Metadata, Status, type CallOptions, type Client, type TsProtoServiceDefinition } from 'nice-grpc';
import { OpenTunnelRequest, OpenTunnelResponse, TunnelServiceDefinition } from '../../gen/svc/core/v1/tunnel';
import {
  entriesOfMetadata,
  metadataOfEntries,
  TunnelFrameKind,
  tunnelFrame,
  type TunnelFrame,
  type TunnelMetadataEntry,
} from '../../core/edge';

/**
 * The gateway's end of the tunnel to the core (proto/svc/core/v1/tunnel.proto,
 * docs/architecture.md "The gateway's tunnel"): the unary and server-streaming methods of the
 * core's services, called as frames on a few long-lived `OpenTunnel` streams instead of one gRPC
 * call each. A client made here has the same methods and semantics as nice-grpc's (metadata,
 * `onHeader`/`onTrailer`, a `ClientError` with the core's status, an `AbortError` when the caller
 * cancels, leaving a stream's loop cancels the call), so the adapters and `callCore` do not know
 * which way a call went.
 *
 * - **Batches.** Frames made ready in one turn of the event loop leave in one message.
 * - **Back-pressure per call.** The core sends a stream's messages at most `TUNNEL_WINDOW` bytes
 *   ahead of what the caller has read; the caller gives credit as it reads, so a slow client
 *   holds up its own stream only.
 * - **Rotation.** A tunnel takes new calls for `maxAgeMs`, then finishes the ones it has and
 *   closes, and a new one is opened: the channel's round-robin balancing places each new tunnel on
 *   the next core, and a core's connection can age out (`grpc.max_connection_age_ms`). A core that
 *   shuts down says GO_AWAY: its tunnels take no new call.
 * - **An older core** that has no TunnelService answers UNIMPLEMENTED: the calls it was sent are
 *   made again directly, and every later call too.
 * - A tunnel that breaks (the core died) fails its running calls with UNAVAILABLE, as their own
 *   connections would have; the next call opens a new tunnel.
 */

const PATH = `/${TunnelServiceDefinition.fullName}/${TunnelServiceDefinition.methods.openTunnel.name}`;
/** The core's window per stream (core/server/tunnel.ts): credit is given back in quarters of it. */
const CREDIT_STEP = 64 * 1024;
/** A message of the tunnel is cut after about this many bytes of requests. */
const BATCH_BYTES = 1024 * 1024;

const tracer = trace.getTracer('svc-tunnel');

interface MessageFns {
  encode(message: never): { finish(): Uint8Array };
  fromPartial?: (object: never) => unknown;
  decode(input: Uint8Array): unknown;
}

export interface TunnelOptions {
  /** Tunnels open at once (calls are spread over them in turn). */
  readonly count: number;
  /** How long a tunnel takes new calls before it is rotated. */
  readonly maxAgeMs?: number;
}

/** What the tunnels of a connection carried so far (tests and `bench/` read it). */
export interface TunnelStats {
  /** Tunnels opened (rotations and reconnections included). */
  opened: number;
  /** Calls started on a tunnel. */
  calls: number;
  /** Messages the gateway wrote on its tunnels (each a batch of frames). */
  writes: number;
  /** Messages the core wrote on them. */
  reads: number;
  /** Calls sent directly because the core has no TunnelService. */
  direct: number;
}

/** One call in flight, as the tunnel sees it. */
interface PendingCall {
  /** A frame of the call arrived. */
  deliver(frame: TunnelFrame): void;
  /** The tunnel broke: `retry` when the core never saw the call (no TunnelService), else fail. */
  lost(error: ClientError, retry: boolean): void;
}

/** One `OpenTunnel` stream. */
class Tunnel {
  readonly calls = new Map<number, PendingCall>();
  private readonly stream: ClientDuplexStream<OpenTunnelRequest, OpenTunnelResponse>;
  private out: TunnelFrame[] = [];
  private scheduled = false;
  private nextId = 1;
  private readonly opened = Date.now();
  /** No new calls: rotated out, or the core said GO_AWAY. */
  draining = false;
  private ended = false;
  private halfClosed = false;
  private answered = false;

  constructor(
    grpc: GrpcClient,
    private readonly stats: TunnelStats,
    private readonly maxAgeMs: number,
    private readonly onGone: (tunnel: Tunnel, unsupported: boolean) => void,
  ) {
    this.stream = grpc.makeBidiStreamRequest(
      PATH,
      (value: OpenTunnelRequest) => {
        const bytes = OpenTunnelRequest.encode(value).finish();
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      },
      (bytes: Buffer) => OpenTunnelResponse.decode(bytes),
      new GrpcMetadata(),
    );
    stats.opened += 1;
    this.stream.on('data', (response: OpenTunnelResponse) => {
      this.answered = true;
      stats.reads += 1;
      for (const f of response.frames) this.receive(f);
    });
    this.stream.on('error', (error: { code?: number; details?: string }) => {
      const unsupported = error.code === Status.UNIMPLEMENTED && !this.answered;
      this.gone(
        new ClientError(PATH, Status.UNAVAILABLE, `the tunnel to the core broke: ${error.details ?? String(error)}`),
        unsupported,
      );
    });
    this.stream.on('status', () =>
      this.gone(new ClientError(PATH, Status.UNAVAILABLE, 'the tunnel to the core ended'), false),
    );
  }

  private knownPeer: string | undefined;

  /** The core this tunnel reached (`HOST:PORT`), once its stream has one; '' before. */
  peer(): string {
    if (this.knownPeer !== undefined) return this.knownPeer;
    const peer = this.stream.getPeer();
    if (peer === '' || peer === 'unknown') return '';
    return (this.knownPeer = peer);
  }

  /** Whether new calls may go here. */
  usable(): boolean {
    if (this.ended || this.draining) return false;
    if (Date.now() - this.opened < this.maxAgeMs) return true;
    this.retire();
    return false;
  }

  /** Takes no new call; half-closes once its calls are done. */
  retire(): void {
    this.draining = true;
    if (this.calls.size === 0 && !this.ended && !this.halfClosed) {
      this.flush();
      this.halfClosed = true;
      this.stream.end();
    }
  }

  start(call: PendingCall, method: string, metadata: TunnelMetadataEntry[], message: Buffer): number {
    let id = this.nextId;
    while (this.calls.has(id) || id === 0) id = (id + 1) >>> 0;
    this.nextId = (id + 1) >>> 0;
    this.calls.set(id, call);
    this.stats.calls += 1;
    this.send(tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_START, { method, metadata, message }));
    return id;
  }

  /** The caller gave up on the call: the core is told, and its frames are dropped from now on. */
  cancel(id: number): void {
    if (!this.calls.delete(id)) return;
    if (!this.ended) this.send(tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_CANCEL));
    this.settled();
  }

  credit(id: number, bytes: number): void {
    if (!this.ended && this.calls.has(id))
      this.send(tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_CREDIT, { credit: bytes }));
  }

  /** A call ended (its STATUS arrived). */
  finished(id: number): void {
    this.calls.delete(id);
    this.settled();
  }

  private settled(): void {
    if (this.draining && this.calls.size === 0) this.retire();
  }

  private send(next: TunnelFrame): void {
    this.out.push(next);
    if (this.scheduled) return;
    this.scheduled = true;
    // Every frame made ready in this turn of the event loop leaves in one message.
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    if (this.out.length === 0 || this.ended || this.halfClosed) return;
    const out = this.out;
    this.out = [];
    // Large requests (long conversations, inline images) leave in messages of about BATCH_BYTES,
    // far below the 64 MiB a gRPC message may hold.
    let from = 0;
    let bytes = 0;
    for (let i = 0; i < out.length; i++) {
      bytes += out[i]!.message.length;
      if (bytes < BATCH_BYTES && i < out.length - 1) continue;
      this.stats.writes += 1;
      this.stream.write({ frames: from === 0 && i === out.length - 1 ? out : out.slice(from, i + 1) });
      from = i + 1;
      bytes = 0;
    }
  }

  private receive(f: TunnelFrame): void {
    if (f.kind === TunnelFrameKind.TUNNEL_FRAME_KIND_GO_AWAY) {
      this.draining = true;
      this.onGone(this, false);
      this.settled();
      return;
    }
    const call = this.calls.get(f.call);
    if (call === undefined) return;
    if (f.kind === TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS) this.finished(f.call);
    call.deliver(f);
  }

  private gone(error: ClientError, unsupported: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.out = [];
    this.onGone(this, unsupported);
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const call of calls) call.lost(error, unsupported);
  }

  close(): void {
    if (this.ended) return;
    this.stream.cancel();
  }
}

/** The tunnels of one connection to the core. */
export interface Tunnels {
  /** `fallback` (a client of the same service made directly) with its methods carried by the tunnels. */
  client<D extends TsProtoServiceDefinition>(definition: D, fallback: Client<D>): Client<D>;
  stats(): TunnelStats;
  close(): void;
}

function spanAttributes(definition: TsProtoServiceDefinition, name: string): Readonly<Record<string, string>> {
  return Object.freeze({
    'rpc.system': 'grpc',
    'rpc.service': definition.fullName,
    'rpc.method': name,
    'svc.transport': 'tunnel',
  });
}

function endSpan(span: Span, code: number): void {
  span.setAttribute('rpc.grpc.status_code', code);
  if (code !== Status.OK) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/** What a method's calls need, read once per method. */
function methodOf(definition: TsProtoServiceDefinition, key: string) {
  const method = definition.methods[key]!;
  const path = `/${definition.fullName}/${method.name}`;
  return {
    path,
    requestType: method.requestType as MessageFns,
    responseType: method.responseType as MessageFns,
    attributes: spanAttributes(definition, method.name),
    name: path.slice(1),
  };
}

const metadataSetter = {
  set(carrier: TunnelMetadataEntry[], key: string, value: string) {
    carrier.push({ key, value });
  },
};

export function createTunnels(grpc: GrpcClient, options: TunnelOptions): Tunnels {
  const count = Math.max(1, options.count);
  const maxAgeMs = options.maxAgeMs ?? 60_000;
  const live: Tunnel[] = [];
  let turn = 0;
  let unsupported = false;
  let closed = false;
  const stats: TunnelStats = { opened: 0, calls: 0, writes: 0, reads: 0, direct: 0 };

  const onGone = (tunnel: Tunnel, noService: boolean): void => {
    const at = live.indexOf(tunnel);
    if (at >= 0) live.splice(at, 1);
    if (noService) unsupported = true;
  };

  /**
   * A tunnel for the next call: a new one while fewer than `count` are open (the channel's
   * round-robin places each on the next core), else the open ones in turn by core, then by
   * tunnel, so calls spread evenly over the cores even where two tunnels reached the same one.
   */
  function pick(): Tunnel {
    for (let i = live.length - 1; i >= 0; i--) if (!live[i]!.usable()) live.splice(i, 1);
    if (live.length < count) {
      const tunnel = new Tunnel(grpc, stats, maxAgeMs, onGone);
      live.push(tunnel);
      return tunnel;
    }
    turn = (turn + 1) >>> 0;
    const first = live[0]!.peer();
    if (live.every((t) => t.peer() === first)) return live[turn % live.length]!;
    const byPeer = new Map<string, Tunnel[]>();
    for (const tunnel of live) {
      const group = byPeer.get(tunnel.peer());
      if (group === undefined) byPeer.set(tunnel.peer(), [tunnel]);
      else group.push(tunnel);
    }
    const groups = [...byPeer.values()];
    const group = groups[turn % groups.length]!;
    return group[Math.floor(turn / groups.length) % group.length]!;
  }

  function requestOf(type: MessageFns, request: unknown): Buffer {
    const bytes = type
      .encode((type.fromPartial === undefined ? request : type.fromPartial(request as never)) as never)
      .finish();
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The call's metadata as frame entries, with the trace context of its span. */
  function startMetadata(options: CallOptions, span: Span): TunnelMetadataEntry[] {
    const entries = entriesOfMetadata(options.metadata === undefined ? undefined : Metadata(options.metadata));
    propagation.inject(trace.setSpan(otelContext.active(), span), entries, metadataSetter);
    return entries;
  }

  function unary(
    definition: TsProtoServiceDefinition,
    key: string,
    fallback: (request: unknown, options?: CallOptions) => Promise<unknown>,
  ): (request: unknown, options?: CallOptions) => Promise<unknown> {
    const { path, requestType, responseType, attributes, name } = methodOf(definition, key);
    return (request, options = {}) => {
      if (unsupported || closed) {
        stats.direct += 1;
        return fallback(request, options);
      }
      const { signal } = options;
      if (signal?.aborted === true) return Promise.reject(new AbortError());
      return new Promise((resolve, reject) => {
        const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
        let message: Buffer;
        try {
          message = requestOf(requestType, request);
        } catch (error) {
          endSpan(span, Status.INTERNAL);
          reject(error as Error);
          return;
        }
        const tunnel = pick();
        let onAbort: (() => void) | undefined;
        const detach = (): void => {
          if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
        };
        const call: PendingCall = {
          deliver(f) {
            if (f.kind !== TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS) return;
            detach();
            options.onHeader?.(metadataOfEntries(f.header));
            options.onTrailer?.(metadataOfEntries(f.metadata));
            endSpan(span, f.code);
            if (f.code !== Status.OK) {
              reject(new ClientError(path, f.code, f.details));
              return;
            }
            try {
              resolve(responseType.decode(f.message));
            } catch (error) {
              reject(new ClientError(path, Status.INTERNAL, `Failed to parse the response: ${String(error)}`));
            }
          },
          lost(error, retry) {
            detach();
            span.end();
            if (retry) {
              stats.direct += 1;
              fallback(request, options).then(resolve, reject);
            } else reject(new ClientError(path, error.code, error.details));
          },
        };
        const id = tunnel.start(call, path, startMetadata(options, span), message);
        if (signal !== undefined) {
          onAbort = () => {
            tunnel.cancel(id);
            endSpan(span, Status.CANCELLED);
            reject(new AbortError());
          };
          signal.addEventListener('abort', onAbort, { once: true });
        }
      });
    };
  }

  function serverStreaming(
    definition: TsProtoServiceDefinition,
    key: string,
    fallback: (request: unknown, options?: CallOptions) => AsyncIterable<unknown>,
  ): (request: unknown, options?: CallOptions) => AsyncIterable<unknown> {
    const { path, requestType, responseType, attributes, name } = methodOf(definition, key);
    return async function* call(request, options = {}) {
      if (unsupported || closed) {
        stats.direct += 1;
        yield* fallback(request, options);
        return;
      }
      const { signal } = options;
      if (signal?.aborted === true) throw new AbortError();
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
      const message = requestOf(requestType, request);
      const queue: Buffer[] = [];
      let status: TunnelFrame | undefined;
      let failure: unknown;
      let retry = false;
      let wake: (() => void) | undefined;
      const poke = (): void => {
        const w = wake;
        wake = undefined;
        w?.();
      };
      const pending: PendingCall = {
        deliver(f) {
          if (f.kind === TunnelFrameKind.TUNNEL_FRAME_KIND_MESSAGE) queue.push(f.message);
          else if (f.kind === TunnelFrameKind.TUNNEL_FRAME_KIND_HEADER)
            options.onHeader?.(metadataOfEntries(f.metadata));
          else if (f.kind === TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS) {
            options.onTrailer?.(metadataOfEntries(f.metadata));
            status = f;
          }
          poke();
        },
        lost(error, again) {
          if (again) retry = true;
          else failure = new ClientError(path, error.code, error.details);
          poke();
        },
      };
      const tunnel = pick();
      const id = tunnel.start(pending, path, startMetadata(options, span), message);
      const onAbort = (): void => {
        failure = new AbortError();
        poke();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      let consumed = 0;
      let code: number = Status.CANCELLED;
      try {
        for (;;) {
          const next = queue.shift();
          if (next !== undefined) {
            consumed += next.length;
            if (consumed >= CREDIT_STEP) {
              tunnel.credit(id, consumed);
              consumed = 0;
            }
            yield responseType.decode(next);
            continue;
          }
          if (failure !== undefined) throw failure;
          if (retry) {
            span.end();
            stats.direct += 1;
            yield* fallback(request, options);
            return;
          }
          if (status !== undefined) {
            code = status.code;
            if (status.code !== Status.OK) throw new ClientError(path, status.code, status.details);
            return;
          }
          await new Promise<void>((resolve) => (wake = resolve));
        }
      } finally {
        signal?.removeEventListener('abort', onAbort);
        // Left early (the consumer broke out, or cancelled): the core stops the call.
        if (status === undefined) tunnel.cancel(id);
        if (!retry) endSpan(span, failure instanceof ClientError ? failure.code : code);
      }
    };
  }

  return {
    client(definition, fallback) {
      const methods: Record<string, unknown> = { ...fallback };
      const direct = fallback as Record<string, never>;
      for (const [key, method] of Object.entries(definition.methods)) {
        // Streamed requests (uploads) stay calls of their own.
        if (method.requestStream) continue;
        methods[key] = method.responseStream
          ? serverStreaming(definition, key, direct[key]!)
          : unary(definition, key, direct[key]!);
      }
      return methods as typeof fallback;
    },
    stats: () => ({ ...stats }),
    close() {
      closed = true;
      for (const tunnel of live) tunnel.close();
      live.length = 0;
    },
  };
}
