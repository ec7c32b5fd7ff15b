import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/*
 * The server under the native-provider fakes (anthropic-upstream.ts, openai-responses-upstream.ts):
 * a real HTTP server on 127.0.0.1:0 that answers each request with a recorded sample of the
 * provider's wire from `samples/` (provenance in samples/SOURCES.md), byte for byte, a stream
 * event by event. Tests queue what the next requests get; the fake checks what the real API
 * checks first (path, key, version, required fields) and answers like it when they are wrong.
 */

export const LLM_SAMPLES_DIR = path.join(__dirname, 'samples');

/** A sample file's text, e.g. `anthropic/stream-basic.sse`. */
export function llmSample(name: string): string {
  return readFileSync(path.join(LLM_SAMPLES_DIR, name), 'utf8');
}

/** What one request gets. */
export type SampleReply =
  /** The sample file, as SSE when it ends in `.sse`, else as JSON (with `status`, default 200). */
  | { readonly sample: string; readonly status?: number; readonly headers?: Record<string, string> }
  /**
   * The first `afterEvents` events of an SSE sample, then the connection is destroyed (or, with
   * `cleanEnd`, the body ends normally: a stream that stops without its last events; with `stall`,
   * it stays open and sends nothing more, as an upstream still thinking).
   */
  | { readonly cut: string; readonly afterEvents: number; readonly cleanEnd?: boolean; readonly stall?: boolean }
  /** A 200 answer whose body is not the wire at all. */
  | { readonly garbage: string; readonly contentType?: string };

export interface RecordedUpstreamRequest {
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
}

export interface SampleUpstream {
  /** http://127.0.0.1:PORT (no path). */
  readonly origin: string;
  readonly requests: RecordedUpstreamRequest[];
  /** Queues replies for the next requests, in order; afterwards the fake's default reply. */
  enqueue(...replies: SampleReply[]): void;
  close(): Promise<void>;
}

export interface SampleUpstreamSpec {
  /** A refusal the real API would give (wrong path, key, missing field): status and JSON body. */
  check(url: string, headers: http.IncomingHttpHeaders, body: Record<string, unknown>): [number, unknown] | undefined;
  /** The reply when nothing is queued (`url`: the request's path). */
  defaultReply(body: Record<string, unknown>, url: string): SampleReply;
}

/** Splits an SSE text into its events (each with its blank line). */
export function sseEvents(text: string): string[] {
  return text.split(/(?<=\n\n)/).filter((e) => e.trim() !== '');
}

export async function startSampleUpstream(spec: SampleUpstreamSpec): Promise<SampleUpstream> {
  const queue: SampleReply[] = [];
  const requests: RecordedUpstreamRequest[] = [];

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"body is not JSON"}');
        return;
      }
      requests.push({ path: req.url ?? '', headers: req.headers, body });
      const refused = spec.check(req.url ?? '', req.headers, body);
      if (refused !== undefined) {
        res.writeHead(refused[0], { 'content-type': 'application/json' }).end(JSON.stringify(refused[1]));
        return;
      }
      const reply = queue.shift() ?? spec.defaultReply(body, req.url ?? '');
      if ('garbage' in reply) {
        res.writeHead(200, { 'content-type': reply.contentType ?? 'application/json' }).end(reply.garbage);
        return;
      }
      const name = 'cut' in reply ? reply.cut : reply.sample;
      const text = llmSample(name);
      if (!name.endsWith('.sse')) {
        const status = 'status' in reply && reply.status !== undefined ? reply.status : 200;
        res.writeHead(status, { 'content-type': 'application/json', ...('headers' in reply ? reply.headers : {}) });
        res.end(text);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const events = sseEvents(text);
      const limit = 'cut' in reply ? reply.afterEvents : events.length;
      void (async () => {
        for (const event of events.slice(0, limit)) {
          if (!res.write(event)) await new Promise((r) => res.once('drain', r));
          // A real server's events arrive in separate packets; the reader must not rely on batching.
          await new Promise((r) => setImmediate(r));
        }
        if ('cut' in reply && reply.stall === true) return;
        if ('cut' in reply && reply.cleanEnd !== true) res.destroy();
        else res.end();
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...replies) => queue.push(...replies),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
