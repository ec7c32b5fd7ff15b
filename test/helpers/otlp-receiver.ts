import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as received, flattened from the OTLP resource/scope nesting. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  readonly serviceName: string;
  readonly scope: string;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
  /** Span events (e.g. the wallet hold and settle), in the order recorded. */
  readonly events: readonly SpanEvent[];
  /** Links to other spans (read from OTLP/JSON exports only; undefined from protobuf). */
  readonly links?: readonly { readonly traceId: string; readonly spanId: string }[];
}

export interface SpanEvent {
  readonly name: string;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
}

export interface OtlpReceiver {
  /** Base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  readonly url: string;
  /** Everything received so far. */
  spans(): ReceivedSpan[];
  /** Content types of the export requests received, in order. */
  contentTypes(): string[];
  /** Resolves with all spans once `predicate` holds; the test's own timeout bounds the wait. */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/**
 * A real OTLP/HTTP trace receiver on 127.0.0.1:0: `POST /v1/traces` in JSON (`http/json`) or
 * protobuf (`http/protobuf`, the exporters' default), answering as a collector does.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const types: string[] = [];
  const waiters = new Set<() => void>();

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim() ?? '';
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      let spans: ReceivedSpan[];
      try {
        if (contentType === 'application/json') spans = spansFromJson(JSON.parse(body.toString('utf8')));
        else if (contentType === 'application/x-protobuf') spans = spansFromProtobuf(body);
        else {
          res.writeHead(415).end();
          return;
        }
      } catch (error) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(String(error));
        return;
      }
      types.push(contentType);
      received.push(...spans);
      if (contentType === 'application/json') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else {
        // An empty ExportTraceServiceResponse.
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.alloc(0));
      }
      for (const wake of [...waiters]) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    contentTypes: () => [...types],
    waitFor(predicate) {
      return new Promise((resolve) => {
        const check = (): void => {
          if (!predicate(received)) return;
          waiters.delete(check);
          resolve([...received]);
        };
        waiters.add(check);
        check();
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
    },
  };
}

// ---- OTLP/JSON -------------------------------------------------------------------------------

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: JsonKeyValue[];
  status?: { code?: number };
  events?: { name?: string; attributes?: JsonKeyValue[] }[];
  links?: { traceId?: string; spanId?: string }[];
}
interface JsonExport {
  resourceSpans?: {
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: JsonSpan[] }[];
  }[];
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value?.stringValue !== undefined) out[key] = value.stringValue;
    else if (value?.boolValue !== undefined) out[key] = value.boolValue;
    else if (value?.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value?.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

function spansFromJson(body: JsonExport): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const serviceName = String(jsonAttributes(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind ?? 0,
          attributes: jsonAttributes(s.attributes),
          serviceName,
          scope: ss.scope?.name ?? '',
          statusCode: s.status?.code ?? 0,
          events: (s.events ?? []).map((e) => ({ name: e.name ?? '', attributes: jsonAttributes(e.attributes) })),
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId ?? '', spanId: l.spanId ?? '' })),
        });
      }
    }
  }
  return out;
}

// ---- OTLP/protobuf ---------------------------------------------------------------------------
// Just enough of the protobuf wire format to read ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1 and trace/v1, common/v1 field numbers).

interface Field {
  readonly no: number;
  readonly wire: number;
  /** Varints and fixed64 as bigint; length-delimited as bytes. */
  readonly value: bigint | Buffer;
}

function* fields(buf: Buffer): Generator<Field> {
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buf[pos++];
      if (byte === undefined) throw new Error('truncated varint');
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < buf.length) {
    const tag = Number(varint());
    const no = tag >>> 3;
    const wire = tag & 7;
    if (wire === 0) yield { no, wire, value: varint() };
    else if (wire === 1) {
      yield { no, wire, value: buf.readBigUInt64LE(pos) };
      pos += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      yield { no, wire, value: buf.subarray(pos, pos + len) };
      pos += len;
    } else if (wire === 5) {
      yield { no, wire, value: BigInt(buf.readUInt32LE(pos)) };
      pos += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
}

const bytes = (f: Field): Buffer => (Buffer.isBuffer(f.value) ? f.value : Buffer.alloc(0));
const num = (f: Field): bigint => (typeof f.value === 'bigint' ? f.value : 0n);

function protoAnyValue(buf: Buffer): string | number | boolean | undefined {
  for (const f of fields(buf)) {
    if (f.no === 1) return bytes(f).toString('utf8');
    if (f.no === 2) return num(f) !== 0n;
    if (f.no === 3) return Number(BigInt.asIntN(64, num(f)));
    if (f.no === 4) {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(num(f));
      return b.readDoubleLE(0);
    }
  }
  return undefined;
}

function protoKeyValue(buf: Buffer, into: Record<string, string | number | boolean>): void {
  let key = '';
  let value: string | number | boolean | undefined;
  for (const f of fields(buf)) {
    if (f.no === 1) key = bytes(f).toString('utf8');
    else if (f.no === 2) value = protoAnyValue(bytes(f));
  }
  if (value !== undefined) into[key] = value;
}

function protoSpan(buf: Buffer, serviceName: string, scope: string): ReceivedSpan {
  let traceId = '';
  let spanId = '';
  let parentSpanId = '';
  let name = '';
  let kind = 0;
  let statusCode = 0;
  const attributes: Record<string, string | number | boolean> = {};
  const events: SpanEvent[] = [];
  for (const f of fields(buf)) {
    if (f.no === 11) {
      let eventName = '';
      const eventAttributes: Record<string, string | number | boolean> = {};
      for (const e of fields(bytes(f))) {
        if (e.no === 2) eventName = bytes(e).toString('utf8');
        else if (e.no === 3) protoKeyValue(bytes(e), eventAttributes);
      }
      events.push({ name: eventName, attributes: eventAttributes });
    } else if (f.no === 1) traceId = bytes(f).toString('hex');
    else if (f.no === 2) spanId = bytes(f).toString('hex');
    else if (f.no === 4) parentSpanId = bytes(f).toString('hex');
    else if (f.no === 5) name = bytes(f).toString('utf8');
    else if (f.no === 6) kind = Number(num(f));
    else if (f.no === 9) protoKeyValue(bytes(f), attributes);
    else if (f.no === 15) {
      for (const s of fields(bytes(f))) if (s.no === 3) statusCode = Number(num(s));
    }
  }
  return { traceId, spanId, parentSpanId, name, kind, attributes, serviceName, scope, statusCode, events };
}

function spansFromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of fields(body)) {
    if (rs.no !== 1) continue;
    const resourceAttributes: Record<string, string | number | boolean> = {};
    const scopeSpans: Buffer[] = [];
    for (const f of fields(bytes(rs))) {
      if (f.no === 1) for (const a of fields(bytes(f))) if (a.no === 1) protoKeyValue(bytes(a), resourceAttributes);
      if (f.no === 2) scopeSpans.push(bytes(f));
    }
    const serviceName = String(resourceAttributes['service.name'] ?? '');
    for (const ss of scopeSpans) {
      let scope = '';
      const spans: Buffer[] = [];
      for (const f of fields(ss)) {
        if (f.no === 1) for (const s of fields(bytes(f))) if (s.no === 1) scope = bytes(s).toString('utf8');
        if (f.no === 2) spans.push(bytes(f));
      }
      for (const s of spans) out.push(protoSpan(s, serviceName, scope));
    }
  }
  return out;
}
