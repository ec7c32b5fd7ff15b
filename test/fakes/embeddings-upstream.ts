import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A fake OpenAI-compatible `/embeddings` upstream on 127.0.0.1:0, speaking the wire as
 * api.openai.com does (`CreateEmbeddingResponse`: `data[].embedding` floats with `index`,
 * `usage.prompt_tokens`), with vectors derived from each input so a test can compute them too,
 * and scriptable HTTP errors.
 */

export interface EmbeddingsRequestSeen {
  readonly body: Record<string, unknown>;
  readonly authorization: string | undefined;
  readonly headers: http.IncomingHttpHeaders;
}

export interface FakeEmbeddingsUpstream {
  /** http://127.0.0.1:PORT/v1 */
  readonly baseUrl: string;
  readonly requests: EmbeddingsRequestSeen[];
  /** The next answer is this HTTP error (status, body). */
  failNext(status: number, body: string): void;
  /** The next answer has no `usage` (as some self-hosted servers answer). */
  omitUsageNext(): void;
  close(): Promise<void>;
}

/** The fake's vector of one input: values with many digits, so a lossy hop shows. */
export function fakeVector(input: unknown, dimensions: number): number[] {
  const seed = JSON.stringify(input);
  let h = 2166136261;
  for (let i = 0; i < seed.length; i += 1) h = Math.imul(h ^ seed.charCodeAt(i), 16777619) >>> 0;
  return Array.from({ length: dimensions }, (_, i) => {
    h = Math.imul(h ^ (i + 1), 2246822507) >>> 0;
    return ((h % 2_000_001) - 1_000_000) / 1_234_567.891;
  });
}

/** The fake's usage: 3 tokens per text input plus its length in words, or the ids given. */
export function fakeTokens(input: unknown): number {
  if (typeof input === 'string') return 3 + input.split(/\s+/).filter(Boolean).length;
  return Array.isArray(input) ? input.length : 0;
}

export const FAKE_DEFAULT_DIMENSIONS = 8;

export async function startFakeEmbeddingsUpstream(): Promise<FakeEmbeddingsUpstream> {
  const requests: EmbeddingsRequestSeen[] = [];
  let failure: { status: number; body: string } | undefined;
  let omitUsage = false;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
        return;
      }
      const body = JSON.parse(raw) as Record<string, unknown>;
      requests.push({ body, authorization: req.headers.authorization, headers: req.headers });
      if (failure !== undefined) {
        res.writeHead(failure.status, { 'content-type': 'application/json' });
        res.end(failure.body);
        failure = undefined;
        return;
      }
      const input = body['input'];
      const inputs: unknown[] = typeof input === 'string' ? [input] : (input as unknown[]);
      const dims = typeof body['dimensions'] === 'number' ? body['dimensions'] : FAKE_DEFAULT_DIMENSIONS;
      const tokens = inputs.reduce<number>((sum, i) => sum + fakeTokens(i), 0);
      res.writeHead(200, { 'content-type': 'application/json' });
      const answer = () => (omitUsage = false);
      res.on('finish', answer);
      res.end(
        JSON.stringify({
          object: 'list',
          // Out of order on purpose: clients (and svc) must place vectors by `index`.
          data: inputs.map((i, index) => ({ object: 'embedding', index, embedding: fakeVector(i, dims) })).reverse(),
          model: String(body['model']),
          ...(omitUsage ? {} : { usage: { prompt_tokens: tokens, total_tokens: tokens } }),
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    failNext(status, body) {
      failure = { status, body };
    },
    omitUsageNext() {
      omitUsage = true;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
