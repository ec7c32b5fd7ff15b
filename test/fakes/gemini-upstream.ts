import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/*
 * A fake of Google's Gemini API (generativelanguage.googleapis.com/v1beta) on 127.0.0.1:0 that
 * replays the recorded samples of test/fixtures/gemini/: generateContent answers, the
 * `?alt=sse` streams byte for byte, embedContent / batchEmbedContents vectors and Google's error
 * bodies, and records every request (path, API key header, body).
 */

const DIR = path.resolve(__dirname, '../fixtures/gemini');

/** A recorded sample, parsed. */
export function geminiSample(name: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(DIR, name), 'utf8')) as Record<string, unknown>;
}

/** A recorded sample's text (the SSE streams). */
export function geminiSampleText(name: string): string {
  return fs.readFileSync(path.join(DIR, name), 'utf8');
}

export type GeminiReply =
  /** 200 with this sample's (or this object's) JSON. */
  | { kind: 'json'; sample?: string; body?: unknown }
  /** 200 text/event-stream, the sample's bytes (or this text). */
  | { kind: 'sse'; sample: string }
  /** With `stall`, the text is sent and the stream then stays open, sending nothing more. */
  | { kind: 'sse-text'; text: string; stall?: boolean }
  /** An error status with a sample's body. */
  | { kind: 'error'; status: number; sample: string };

export interface GeminiRequestSeen {
  readonly method: string;
  /** `models/NAME:METHOD` */
  readonly path: string;
  readonly query: string;
  readonly apiKey: string | undefined;
  readonly body: Record<string, unknown>;
}

export interface FakeGeminiUpstream {
  /** http://127.0.0.1:PORT/v1beta */
  readonly baseUrl: string;
  readonly requests: GeminiRequestSeen[];
  /** The answer to the next generateContent / streamGenerateContent call (then the defaults again). */
  next(reply: GeminiReply): void;
  close(): Promise<void>;
}

function batchAnswer(count: number): unknown {
  const recorded = geminiSample('batch-embed-contents.json')['embeddings'] as unknown[];
  return { embeddings: Array.from({ length: count }, (_, i) => recorded[i % recorded.length]) };
}

export async function startFakeGeminiUpstream(): Promise<FakeGeminiUpstream> {
  const requests: GeminiRequestSeen[] = [];
  let scripted: GeminiReply | undefined;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const match = /^\/v1beta\/(models\/[^:]+):(\w+)$/.exec(url.pathname);
      const key = req.headers['x-goog-api-key'];
      let body: Record<string, unknown> = {};
      try {
        body = raw === '' ? {} : (JSON.parse(raw) as Record<string, unknown>);
      } catch {
        // Recorded as empty.
      }
      requests.push({
        method: req.method ?? '',
        path: match === null ? url.pathname : `${match[1]}:${match[2]}`,
        query: url.search,
        apiKey: typeof key === 'string' ? key : undefined,
        body,
      });
      const send = (reply: GeminiReply): void => {
        if (reply.kind === 'sse' || reply.kind === 'sse-text') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          if (reply.kind === 'sse-text' && reply.stall === true) res.write(reply.text);
          else res.end(reply.kind === 'sse' ? geminiSampleText(reply.sample) : reply.text);
          return;
        }
        const status = reply.kind === 'error' ? reply.status : 200;
        const json = reply.kind === 'json' && reply.body !== undefined ? reply.body : geminiSample(reply.sample ?? '');
        res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
        res.end(JSON.stringify(json));
      };
      if (match === null) {
        send({ kind: 'error', status: 404, sample: 'error-404-model-not-found.json' });
        return;
      }
      const method = match[2];
      if (method === 'embedContent') return send({ kind: 'json', sample: 'embed-content.json' });
      if (method === 'batchEmbedContents') {
        const count = Array.isArray(body['requests']) ? body['requests'].length : 0;
        return send({ kind: 'json', body: batchAnswer(count) });
      }
      const reply = scripted;
      scripted = undefined;
      if (method === 'streamGenerateContent')
        return send(reply ?? { kind: 'sse', sample: 'stream-generate-content.sse.txt' });
      return send(reply ?? { kind: 'json', sample: 'generate-content-thinking.json' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1beta`,
    requests,
    next(reply) {
      scripted = reply;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
