import { context as otelContext, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { AbortError, isAbortError } from 'abort-controller-x';
import {
  ClientError,
  Metadata,
  ServerError,
  Status,
  type CallContext,
  type CallOptions,
  type MethodDescriptor,
  type ServerMiddleware,
} from 'nice-grpc-common';

/** A ts-proto / nice-grpc service definition, as far as the channel needs it. */
export interface ServiceDefinitionLike {
  readonly fullName: string;
  readonly methods: Readonly<
    Record<
      string,
      {
        readonly name: string;
        readonly requestStream: boolean;
        readonly responseStream: boolean;
        readonly options: MethodDescriptor['options'];
      }
    >
  >;
}

type Handler = (request: unknown, context: CallContext) => unknown;

/** One service as the core serves it: its definition and its implementation. */
export interface ServiceBinding {
  readonly definition: ServiceDefinitionLike;
  readonly implementation: object;
}

/**
 * Clients of the core's services that call their implementations in this process, through the
 * same server middleware (drain, errors, context and auth, outcome) and with the same CallContext
 * (metadata, header, trailer, cancellation) as the gRPC server gives them, but without HTTP/2
 * framing or protobuf encoding: what grpc-java's in-process transport and grpc-go's bufconn do.
 * Callers see what a nice-grpc client sees: the same methods, `onHeader`/`onTrailer`, a
 * `ClientError` with the status code and details, an `AbortError` when they cancel.
 *
 * Messages are copied at the boundary (`copyMessage`, a deep copy), so neither side ever holds an
 * object the other may change. A stream is pulled one message at a time, so a consumer that stops
 * reading stops the producer (back-pressure); leaving the loop cancels the call.
 */
export interface InProcessChannel {
  /** A client of `definition`, typed like nice-grpc's `createClient(definition, channel)`. */
  client<D extends ServiceDefinitionLike>(definition: D): unknown;
}

const tracer = trace.getTracer('svc-in-process');

function pathOf(definition: ServiceDefinitionLike, name: string): string {
  return `/${definition.fullName}/${name}`;
}

// Past this depth a message is copied by `structuredClone` (which also handles cycles).
const MAX_COPY_DEPTH = 64;

class TooDeep extends Error {}

function copyValue(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) {
    // Functions and symbols cannot cross the boundary: structuredClone says so as it would have.
    return typeof value === 'function' || typeof value === 'symbol' ? structuredClone(value) : value;
  }
  if (depth > MAX_COPY_DEPTH) throw new TooDeep();
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = copyValue(value[i], depth + 1);
    return out;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const copy = copyValue((value as Record<string, unknown>)[key], depth + 1);
      // An own `__proto__` (JSON.parse makes one) stays a property, never the copy's prototype.
      if (key === '__proto__')
        Object.defineProperty(out, key, { value: copy, writable: true, enumerable: true, configurable: true });
      else out[key] = copy;
    }
    return out;
  }
  // What ts-proto messages hold besides plain objects: timestamps and bytes, copied as
  // structuredClone copies them (a Buffer arrives as a Uint8Array).
  if (value instanceof Date) return new Date(value.getTime());
  if (value instanceof Uint8Array) return new Uint8Array(value);
  return structuredClone(value);
}

/**
 * A deep copy of a message, as `structuredClone` makes it (plain objects, arrays, bigints, dates,
 * bytes; anything else through `structuredClone` itself), several times faster for the small
 * plain objects that messages are: a stream copies every chunk.
 */
export function copyMessage<T>(value: T): T {
  try {
    return copyValue(value, 0) as T;
  } catch (error) {
    if (error instanceof TooDeep) return structuredClone(value);
    throw error;
  }
}

function copyMetadata(from: Metadata | undefined): Metadata {
  const out = Metadata();
  if (from === undefined) return out;
  for (const [key, values] of from) for (const value of values) out.append(key, value as never);
  return out;
}

/** A method's span attributes, built once per method (the tracer copies what it keeps). */
function spanAttributes(
  definition: ServiceDefinitionLike,
  name: string,
  transport: string,
): Readonly<Record<string, string>> {
  return Object.freeze({
    'rpc.system': 'grpc',
    'rpc.service': definition.fullName,
    'rpc.method': name,
    'svc.transport': transport,
  });
}

/**
 * How a channel differs from the in-process one `svc serve` uses. The core's end of the
 * gateway's tunnel (`core/server/tunnel.ts`) is such a channel: its messages were just decoded
 * from the wire and are encoded again at once, so nobody else holds them (no copies), the
 * gateway made the client span already (only the server span here), and the caller is the
 * tunnel's peer.
 */
export interface ChannelOptions {
  /** Copy every message (deeply) and the metadata at the boundary (default true). */
  readonly copy?: boolean;
  /** `svc.transport` of the spans; a channel other than `in-process` makes no client span. */
  readonly transport?: string;
}

/** A call's options on a channel: nice-grpc's, and whom the server sees as the caller. */
export interface ChannelCallOptions extends CallOptions {
  /** The caller's address as the server context's `peer` (default `in-process`). */
  readonly peer?: string;
}

const same = <T>(value: T): T => value;

function endSpan(span: Span, error: unknown): void {
  if (error !== undefined) {
    const code = error instanceof ServerError ? error.code : isAbortError(error) ? Status.CANCELLED : Status.UNKNOWN;
    span.setAttribute('rpc.grpc.status_code', code);
    span.setStatus({ code: SpanStatusCode.ERROR });
  } else {
    span.setAttribute('rpc.grpc.status_code', Status.OK);
  }
  span.end();
}

/** What the server side of one call needs: its context and how it ends. */
interface ServerSide {
  readonly context: CallContext;
  /** Sends the header once (to `onHeader`), as the gRPC server does before the first message. */
  sendHeader(): void;
  /** The end of the call: trailers, then the status as the client sees it. */
  finish(error: unknown): unknown;
  readonly cancel: () => void;
}

/**
 * `streaming`: the server may cancel the call on its own (the consumer left the loop), so its
 * signal is its own, following the client's. A unary call is only ever cancelled by its client:
 * the client's signal serves as the server's as it is (no controller, no listener per call).
 */
function serverSide(path: string, options: ChannelCallOptions, streaming: boolean, copy: boolean): ServerSide {
  const clientSignal = options.signal;
  let signal: AbortSignal;
  let cancel = (): void => undefined;
  let detach = (): void => undefined;
  if (!streaming && clientSignal !== undefined) signal = clientSignal;
  else {
    const controller = new AbortController();
    const onAbort = (): void => controller.abort();
    if (clientSignal?.aborted === true) controller.abort();
    else if (clientSignal !== undefined) {
      clientSignal.addEventListener('abort', onAbort, { once: true });
      detach = () => clientSignal.removeEventListener('abort', onAbort);
    }
    signal = controller.signal;
    cancel = () => controller.abort();
  }
  const header = Metadata();
  const trailer = Metadata();
  let headerSent = false;
  let finished = false;
  const sendHeader = (): void => {
    if (headerSent) return;
    headerSent = true;
    // Once the call has finished the server no longer changes its header: no copy is needed then.
    options.onHeader?.(finished || !copy ? header : copyMetadata(header));
  };
  const context: CallContext = {
    metadata: copy || options.metadata === undefined ? copyMetadata(options.metadata) : options.metadata,
    peer: options.peer ?? 'in-process',
    header,
    sendHeader,
    trailer,
    signal,
  };
  return {
    context,
    sendHeader,
    cancel,
    finish(error) {
      finished = true;
      detach();
      sendHeader();
      // The server is done with its trailer: the client gets it as it is.
      options.onTrailer?.(trailer);
      if (error === undefined) return undefined;
      // The client's own cancellation is an AbortError to it, whatever the server made of it.
      if (clientSignal?.aborted === true) return new AbortError();
      if (error instanceof ServerError) return new ClientError(path, error.code, error.details);
      if (isAbortError(error)) return new ClientError(path, Status.CANCELLED, 'The operation was cancelled');
      return new ClientError(path, Status.UNKNOWN, 'Unknown server error occurred');
    },
  };
}

/**
 * Builds the in-process channel over `bindings`, every call passing `middleware` (the composed
 * chain the gRPC server uses) first.
 */
export function createInProcessChannel(
  bindings: readonly ServiceBinding[],
  middleware: ServerMiddleware<unknown>,
  channelOptions: ChannelOptions = {},
): InProcessChannel {
  const copies = channelOptions.copy !== false;
  const copy: <T>(value: T) => T = copies ? copyMessage : same;
  const transport = channelOptions.transport ?? 'in-process';
  const clientSpans = transport === 'in-process';
  const implementations = new Map<ServiceDefinitionLike, object>(bindings.map((b) => [b.definition, b.implementation]));

  /**
   * The service's handler of a method, bound to it; a method the implementation lacks answers
   * UNIMPLEMENTED when called, as a gRPC server does, never when the client is made.
   */
  function handlerOf(definition: ServiceDefinitionLike, key: string, path: string, streaming = false): Handler {
    const target = implementations.get(definition) as Record<string, Handler> | undefined;
    const found = target?.[key];
    if (found !== undefined) return found.bind(target);
    const missing = (): ServerError => new ServerError(Status.UNIMPLEMENTED, `${path} is not implemented`);
    if (!streaming) return () => Promise.reject(missing());
    // eslint-disable-next-line require-yield
    return async function* unimplemented() {
      throw missing();
    };
  }

  function unary(definition: ServiceDefinitionLike, key: string) {
    const method = definition.methods[key]!;
    const path = pathOf(definition, method.name);
    const descriptor: MethodDescriptor = { path, requestStream: false, responseStream: false, options: method.options };
    const impl = handlerOf(definition, key, path);
    const attributes = spanAttributes(definition, method.name, transport);
    const name = path.slice(1);
    // A unary method is a generator that only returns, as nice-grpc's own handler is.
    // eslint-disable-next-line require-yield
    async function* next(request: unknown, context: CallContext): AsyncGenerator<never, unknown, undefined> {
      return await impl(request, context);
    }
    return async (request: unknown, options: ChannelCallOptions = {}): Promise<unknown> => {
      const span = clientSpans ? tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }) : undefined;
      const side = serverSide(path, options, false, copies);
      const run = async (): Promise<unknown> => {
        const server = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes });
        let failure: unknown;
        try {
          return await otelContext.with(trace.setSpan(otelContext.active(), server), async () => {
            const iterator = middleware(
              {
                method: descriptor,
                requestStream: false,
                request: copy(request),
                responseStream: false,
                next,
              } as never,
              side.context,
            )[Symbol.asyncIterator]();
            const result = await iterator.next();
            if (result.done !== true || result.value === undefined)
              throw new Error(`in-process ${path}: the middleware chain returned no message`);
            return copy(result.value);
          });
        } catch (error) {
          failure = error;
          throw error;
        } finally {
          endSpan(server, failure);
        }
      };
      let failure: unknown;
      try {
        const response =
          span === undefined ? await run() : await otelContext.with(trace.setSpan(otelContext.active(), span), run);
        side.finish(undefined);
        return response;
      } catch (error) {
        failure = error;
        throw side.finish(error);
      } finally {
        if (span !== undefined) endSpan(span, failure);
      }
    };
  }

  /** Each message of a client's request stream, copied as it crosses, pulled as the server reads. */
  async function* copied(requests: AsyncIterable<unknown>): AsyncGenerator<unknown, void, undefined> {
    for await (const message of requests) yield copy(message);
  }

  /** A server-streaming method, or a bidirectional one (`requestStream`: its request an async iterable). */
  function serverStreaming(definition: ServiceDefinitionLike, key: string) {
    const method = definition.methods[key]!;
    const path = pathOf(definition, method.name);
    const requestStream = method.requestStream;
    const descriptor: MethodDescriptor = { path, requestStream, responseStream: true, options: method.options };
    const impl = handlerOf(definition, key, path, true);
    async function* next(request: unknown, context: CallContext): AsyncGenerator<unknown, void, undefined> {
      yield* impl(request, context) as AsyncIterable<unknown>;
    }
    const attributes = spanAttributes(definition, method.name, transport);
    const name = path.slice(1);
    return async function* call(
      request: unknown,
      options: ChannelCallOptions = {},
    ): AsyncGenerator<unknown, void, undefined> {
      const span = clientSpans ? tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }) : undefined;
      const clientContext = span === undefined ? otelContext.active() : trace.setSpan(otelContext.active(), span);
      const server = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, clientContext);
      const serverContext = trace.setSpan(clientContext, server);
      const side = serverSide(path, options, true, copies);
      const iterator = otelContext.with(serverContext, () =>
        middleware(
          {
            method: descriptor,
            requestStream,
            request: requestStream ? copied(request as AsyncIterable<unknown>) : copy(request),
            responseStream: true,
            next,
          } as never,
          side.context,
        )[Symbol.asyncIterator](),
      );
      let failure: unknown;
      let done = false;
      try {
        for (;;) {
          // Each message is produced only when the consumer asks for it: back-pressure end to end.
          const result = await otelContext.with(serverContext, () => iterator.next());
          if (result.done === true) break;
          side.sendHeader();
          yield copy(result.value);
        }
        done = true;
      } catch (error) {
        failure = error;
        throw side.finish(error);
      } finally {
        if (!done && failure === undefined) {
          // The consumer left the loop: cancel the call, let the chain run its `finally` blocks.
          side.cancel();
          await otelContext.with(serverContext, () => iterator.return(undefined)).catch(() => undefined);
          failure = new AbortError();
          side.finish(failure);
        } else if (done) side.finish(undefined);
        endSpan(server, failure);
        if (span !== undefined) endSpan(span, failure);
      }
    };
  }

  return {
    client(definition) {
      const client: Record<string, unknown> = {};
      for (const [key, method] of Object.entries(definition.methods)) {
        // Client streaming without a response stream: no service of the core has one.
        if (method.requestStream && !method.responseStream) continue;
        client[key] = method.responseStream ? serverStreaming(definition, key) : unary(definition, key);
      }
      return client;
    },
  };
}
