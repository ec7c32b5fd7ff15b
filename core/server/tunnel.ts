import { context as otelContext, propagation, ROOT_CONTEXT, type TextMapGetter } from '@opentelemetry/api';
import { isAbortError } from 'abort-controller-x';
import { ClientError, type Metadata, Status, type CallContext } from 'nice-grpc-common';
import type { OpenTunnelRequest, OpenTunnelResponse } from '../../gen/svc/core/v1/tunnel';
import { entriesOfMetadata, metadataOfEntries, TunnelFrameKind, tunnelFrame, type TunnelFrame } from './tunnel-wire';
import type { ChannelCallOptions, InProcessChannel, ServiceBinding } from './in-process';

/**
 * The core's end of the gateway's tunnel (`TunnelService.OpenTunnel`, proto/svc/core/v1/tunnel.proto):
 * many calls of the core's services over one long-lived gRPC stream, so that a gateway pays
 * HTTP/2's and grpc-js's per-call work once per batch of frames instead of once per call
 * (docs/architecture.md, "The gateway's tunnel"). Each call inside runs through `channel`, a
 * channel over the same services and the same server middleware as the gRPC server's (drain,
 * errors, context and auth, limits, outcome), with its own metadata, cancellation, header and
 * trailer: the tunnel carries calls and decides nothing.
 *
 * What a call costs on the wire: its request in a START frame, a unary answer in one STATUS frame
 * (header, message, trailer), a stream's messages in MESSAGE frames, sent while the caller's
 * credit lasts (`WINDOW` bytes ahead of what it consumed: a caller that stops reading one stream
 * stops that stream only, never the tunnel), then a STATUS frame. Frames ready in the same turn
 * of the event loop leave in one message.
 */

/** Bytes of a stream's messages the core sends ahead of the caller's credit. */
export const TUNNEL_WINDOW = 256 * 1024;
/** A batch is cut after this many bytes of messages: the rest leave in the next message. */
const BATCH_BYTES = 1024 * 1024;

interface MessageFns {
  encode(message: never): { finish(): Uint8Array };
  fromPartial(object: never): unknown;
  decode(input: Uint8Array): unknown;
}

interface TunnelMethod {
  readonly path: string;
  readonly streaming: boolean;
  readonly invoke: (request: unknown, options: ChannelCallOptions) => unknown;
  readonly requestType: MessageFns;
  readonly responseType: MessageFns;
}

/** One call running in a tunnel. */
interface RunningCall {
  readonly abort: AbortController;
  /** Bytes sent and not yet credited (streams). */
  unacked: number;
  /** Wakes a stream waiting for credit. */
  resume: (() => void) | undefined;
}

const metadataGetter: TextMapGetter<Metadata> = {
  keys: (carrier) => [...carrier].map(([key]) => key),
  get: (carrier, key) => {
    const value = carrier.get(key);
    return typeof value === 'string' ? value : undefined;
  },
};

/** The status a failed call ends with, as the client of a direct call would see it. */
function statusOf(error: unknown): { code: number; details: string } {
  if (error instanceof ClientError) return { code: error.code, details: error.details };
  if (isAbortError(error)) return { code: Status.CANCELLED, details: 'The operation was cancelled' };
  return { code: Status.UNKNOWN, details: 'Unknown server error occurred' };
}

function encoded(type: MessageFns, message: unknown): Buffer {
  const bytes = type.encode(type.fromPartial(message as never) as never).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The core's tunnels: the service implementation, and a way to close every open tunnel. */
export interface TunnelServer {
  readonly implementation: {
    openTunnel(requests: AsyncIterable<OpenTunnelRequest>, context: CallContext): AsyncIterable<OpenTunnelResponse>;
  };
  /** Shutting down: every open tunnel says GO_AWAY, takes no new call, and ends once its calls have. */
  goAway(): void;
}

export function createTunnelServer(bindings: readonly ServiceBinding[], channel: InProcessChannel): TunnelServer {
  const methods = new Map<string, TunnelMethod>();
  for (const { definition } of bindings) {
    const client = channel.client(definition) as Record<string, TunnelMethod['invoke']>;
    const full = definition as unknown as {
      methods: Record<string, { requestType: MessageFns; responseType: MessageFns }>;
    };
    for (const [key, method] of Object.entries(definition.methods)) {
      // Streamed requests (uploads) stay on calls of their own.
      if (method.requestStream) continue;
      const invoke = client[key];
      if (invoke === undefined) continue;
      const path = `/${definition.fullName}/${method.name}`;
      methods.set(path, {
        path,
        streaming: method.responseStream,
        invoke,
        requestType: full.methods[key]!.requestType,
        responseType: full.methods[key]!.responseType,
      });
    }
  }
  const open = new Set<Session>();
  let closing = false;

  class Session {
    private out: TunnelFrame[] = [];
    private outBytes = 0;
    private scheduled = false;
    private wake: (() => void) | undefined;
    private readonly calls = new Map<number, RunningCall>();
    private inputDone = false;
    private goingAway = false;

    constructor(private readonly peer: string) {}

    push(next: TunnelFrame): void {
      this.out.push(next);
      this.outBytes += next.message.length;
      if (this.scheduled) return;
      this.scheduled = true;
      // Everything made ready in this turn of the loop leaves together.
      setImmediate(() => {
        this.scheduled = false;
        this.wake?.();
      });
    }

    private done(): boolean {
      return (this.inputDone || this.goingAway) && this.calls.size === 0 && this.out.length === 0;
    }

    async *responses(): AsyncGenerator<OpenTunnelResponse> {
      for (;;) {
        if (this.out.length > 0) {
          let cut = this.out.length;
          if (this.outBytes > BATCH_BYTES) {
            let bytes = 0;
            for (cut = 0; cut < this.out.length && bytes < BATCH_BYTES; cut++) bytes += this.out[cut]!.message.length;
          }
          const frames = cut === this.out.length ? this.out : this.out.slice(0, cut);
          this.out = cut === this.out.length ? [] : this.out.slice(cut);
          this.outBytes = 0;
          for (const f of this.out) this.outBytes += f.message.length;
          yield { frames };
          continue;
        }
        if (this.done()) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    }

    /** The caller is gone (its stream failed or was cancelled): every call it had is cancelled. */
    abortAll(): void {
      this.inputDone = true;
      for (const call of this.calls.values()) {
        call.abort.abort();
        call.resume?.();
      }
      this.wake?.();
    }

    endInput(): void {
      this.inputDone = true;
      this.wake?.();
    }

    goAway(): void {
      if (this.goingAway) return;
      this.goingAway = true;
      this.push(tunnelFrame(0, TunnelFrameKind.TUNNEL_FRAME_KIND_GO_AWAY));
    }

    handle(f: TunnelFrame): void {
      switch (f.kind) {
        case TunnelFrameKind.TUNNEL_FRAME_KIND_START:
          this.start(f);
          return;
        case TunnelFrameKind.TUNNEL_FRAME_KIND_CANCEL: {
          const call = this.calls.get(f.call);
          if (call === undefined) return;
          call.abort.abort();
          call.resume?.();
          return;
        }
        case TunnelFrameKind.TUNNEL_FRAME_KIND_CREDIT: {
          const call = this.calls.get(f.call);
          if (call === undefined) return;
          call.unacked -= f.credit;
          call.resume?.();
          return;
        }
        default:
          return;
      }
    }

    private end(id: number, status: Partial<TunnelFrame>): void {
      this.calls.delete(id);
      this.push(tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS, status));
      if (this.done()) this.wake?.();
    }

    private start(f: TunnelFrame): void {
      const id = f.call;
      const method = methods.get(f.method);
      if (method === undefined) {
        this.push(
          tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS, {
            code: Status.UNIMPLEMENTED,
            details: `${f.method} is not implemented`,
          }),
        );
        return;
      }
      if (this.goingAway || closing || this.calls.has(id)) {
        this.push(
          tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS, {
            code: Status.UNAVAILABLE,
            details: this.calls.has(id) ? `call ${id} is already running` : 'the core is shutting down',
          }),
        );
        return;
      }
      let request: unknown;
      try {
        request = method.requestType.decode(f.message);
      } catch {
        this.push(
          tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_STATUS, {
            code: Status.INTERNAL,
            details: `Failed to parse the request of ${method.path}`,
          }),
        );
        return;
      }
      const call: RunningCall = { abort: new AbortController(), unacked: 0, resume: undefined };
      this.calls.set(id, call);
      const metadata = metadataOfEntries(f.metadata);
      // The caller's trace continues here, as over a call of its own.
      const parent = propagation.extract(ROOT_CONTEXT, metadata, metadataGetter);
      otelContext.with(parent, () => {
        if (method.streaming) void this.stream(id, call, method, request, metadata);
        else this.unary(id, call, method, request, metadata);
      });
    }

    private unary(id: number, call: RunningCall, method: TunnelMethod, request: unknown, metadata: Metadata): void {
      let header: Metadata | undefined;
      let trailer: Metadata | undefined;
      const options: ChannelCallOptions = {
        metadata,
        signal: call.abort.signal,
        peer: this.peer,
        onHeader: (h) => (header = h),
        onTrailer: (t) => (trailer = t),
      };
      (method.invoke(request, options) as Promise<unknown>).then(
        (response) => {
          let message: Buffer;
          try {
            message = encoded(method.responseType, response);
          } catch {
            this.end(id, { code: Status.INTERNAL, details: `Failed to encode the response of ${method.path}` });
            return;
          }
          this.end(id, { message, header: entriesOfMetadata(header), metadata: entriesOfMetadata(trailer) });
        },
        (error: unknown) =>
          this.end(id, { ...statusOf(error), header: entriesOfMetadata(header), metadata: entriesOfMetadata(trailer) }),
      );
    }

    private async stream(
      id: number,
      call: RunningCall,
      method: TunnelMethod,
      request: unknown,
      metadata: Metadata,
    ): Promise<void> {
      let trailer: Metadata | undefined;
      const signal = call.abort.signal;
      const options: ChannelCallOptions = {
        metadata,
        signal,
        peer: this.peer,
        onHeader: (h) =>
          this.push(tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_HEADER, { metadata: entriesOfMetadata(h) })),
        onTrailer: (t) => (trailer = t),
      };
      const iterator = (method.invoke(request, options) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
      try {
        for (;;) {
          // Back-pressure per call: past the window, wait until the caller has read some.
          while (call.unacked >= TUNNEL_WINDOW && !signal.aborted)
            await new Promise<void>((resolve) => (call.resume = resolve));
          call.resume = undefined;
          if (signal.aborted) {
            await iterator.return?.(undefined);
            this.end(id, { code: Status.CANCELLED, details: 'The operation was cancelled' });
            return;
          }
          const next = await iterator.next();
          if (next.done === true) break;
          const message = encoded(method.responseType, next.value);
          call.unacked += message.length;
          this.push(tunnelFrame(id, TunnelFrameKind.TUNNEL_FRAME_KIND_MESSAGE, { message }));
        }
        this.end(id, { metadata: entriesOfMetadata(trailer) });
      } catch (error) {
        this.end(id, { ...statusOf(error), metadata: entriesOfMetadata(trailer) });
      }
    }
  }

  return {
    implementation: {
      async *openTunnel(requests, context) {
        const session = new Session(context.peer);
        open.add(session);
        if (closing) session.goAway();
        const onAbort = (): void => session.abortAll();
        context.signal.addEventListener('abort', onAbort, { once: true });
        void (async () => {
          try {
            for await (const request of requests) for (const f of request.frames) session.handle(f);
            session.endInput();
          } catch {
            session.abortAll();
          }
        })();
        try {
          yield* session.responses();
        } finally {
          context.signal.removeEventListener('abort', onAbort);
          open.delete(session);
        }
      },
    },
    goAway() {
      closing = true;
      for (const session of open) session.goAway();
    },
  };
}
