import Busboy, { type BusboyHeaders } from '@fastify/busboy';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A fake OpenAI media upstream on 127.0.0.1:0, speaking api.openai.com's wire for images
 * (`ImagesResponse`), speech (audio bytes), transcription and translation (multipart in, `json` or
 * `verbose_json` out), moderations (`CreateModerationResponse`) and an OpenAI-compatible `/rerank`,
 * plus Cohere's v2 rerank at `/v2/rerank`; with scriptable errors and answers.
 */

type Obj = Record<string, unknown>;

export interface MediaRequestSeen {
  readonly path: string;
  readonly authorization: string | undefined;
  /** The JSON body, or a multipart form's text fields. */
  readonly body: Obj;
  /** A multipart form's files: field, filename, bytes. */
  readonly files: { field: string; filename: string; size: number }[];
}

export interface FakeMediaUpstream {
  /** http://127.0.0.1:PORT/v1 (OpenAI's routes) */
  readonly baseUrl: string;
  /** http://127.0.0.1:PORT (Cohere's `/v2/rerank`) */
  readonly root: string;
  readonly requests: MediaRequestSeen[];
  /** The next answer is this HTTP error. */
  failNext(status: number, body: unknown): void;
  /** The next answer's JSON gets these fields (replacing the fake's). */
  patchNext(fields: Obj): void;
  /** The next streamed transcription sends its first delta, then the connection is cut. */
  cutStreamNext(): void;
  /**
   * Holds every answer (each request is in `requests` once read) until the returned function is
   * called: calls stay in flight, held in the wallet, as long as the test wants.
   */
  pause(): () => void;
  close(): Promise<void>;
}

/** The fake's speech: bytes from the input, as an MP3 frame-ish blob (never parsed). */
export function fakeSpeech(input: string): Buffer {
  return Buffer.concat([Buffer.from([0xff, 0xfb, 0x90, 0x64]), Buffer.from(input, 'utf8')]);
}

export const FAKE_TRANSCRIPT = 'Hello from the fake upstream.';
/** A streamed transcription's deltas (gpt-4o-transcribe sends a few words each), joining to FAKE_TRANSCRIPT. */
export const FAKE_DELTAS = ['Hello', ' from', ' the fake', ' upstream.'];
/** The token usage of the fake's `transcript.text.done` (OpenAI's `TranscriptTextUsageTokens`). */
export const FAKE_STREAM_USAGE = {
  type: 'tokens',
  input_tokens: 120,
  input_token_details: { text_tokens: 0, audio_tokens: 120 },
  output_tokens: 9,
  total_tokens: 129,
};
/** Seconds the fake says it heard, whatever the file. */
export const FAKE_SECONDS = 2;
/** The fake's token usage of a GPT image call (its prompt's text tokens and the image it made). */
export const FAKE_IMAGE_TOKENS = { input_tokens: 50, output_tokens: 4160 };
/**
 * The input image tokens the fake reports for each `image[]` an edit uploads (gpt-image-1's count
 * of a 1024×1024 input, `input_tokens_details.image_tokens`), on top of FAKE_IMAGE_TOKENS' text.
 */
export const FAKE_EDIT_IMAGE_TOKENS = 323;

const tinyPng = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC',
  'base64',
).toString('base64');

function readForm(req: http.IncomingMessage): Promise<{ body: Obj; files: MediaRequestSeen['files'] }> {
  return new Promise((resolve, reject) => {
    const body: Obj = {};
    const files: MediaRequestSeen['files'] = [];
    const parser = Busboy({ headers: req.headers as BusboyHeaders });
    parser.on('field', (name, value) => {
      if (name.endsWith('[]')) {
        const key = name.slice(0, -2);
        body[key] = [...(Array.isArray(body[key]) ? (body[key] as unknown[]) : []), value];
      } else body[name] = value;
    });
    parser.on('file', (field, stream, filename) => {
      let size = 0;
      stream.on('data', (c: Buffer) => (size += c.length));
      stream.on('end', () => files.push({ field, filename, size }));
    });
    parser.on('finish', () => resolve({ body, files }));
    parser.on('error', reject);
    req.pipe(parser);
  });
}

/** OpenAI's `ImagesUsage` of a GPT image call that read `images` input images. */
function imageUsage(images: number): Obj {
  const imageTokens = images * FAKE_EDIT_IMAGE_TOKENS;
  const input = FAKE_IMAGE_TOKENS.input_tokens + imageTokens;
  return {
    input_tokens: input,
    output_tokens: FAKE_IMAGE_TOKENS.output_tokens,
    total_tokens: input + FAKE_IMAGE_TOKENS.output_tokens,
    input_tokens_details: { text_tokens: FAKE_IMAGE_TOKENS.input_tokens, image_tokens: imageTokens },
  };
}

async function readJson(req: http.IncomingMessage): Promise<Obj> {
  let raw = '';
  for await (const chunk of req as AsyncIterable<Buffer>) raw += chunk.toString('utf8');
  return JSON.parse(raw) as Obj;
}

function answer(
  path: string,
  body: Obj,
  files: MediaRequestSeen['files'],
): { status: number; type: string; data: Buffer | Obj } {
  switch (path) {
    case '/v1/images/generations':
    case '/v1/images/edits': {
      const n = Number(body['n'] ?? 1);
      const gpt = String(body['model']).startsWith('gpt-image');
      const format = gpt ? 'b64_json' : (body['response_format'] ?? 'url');
      return {
        status: 200,
        type: 'application/json',
        data: {
          created: 1_700_000_000,
          data: Array.from({ length: n }, (_, i) =>
            format === 'b64_json' ? { b64_json: tinyPng } : { url: `https://fake.example/img/${i}.png` },
          ),
          ...(gpt
            ? {
                usage: imageUsage(files.filter((f) => f.field === 'image[]' || f.field === 'image').length),
                size: body['size'] ?? '1024x1024',
                quality: body['quality'] ?? 'high',
                output_format: 'png',
                background: 'opaque',
              }
            : {}),
        },
      };
    }
    case '/v1/audio/speech':
      return { status: 200, type: 'audio/mpeg', data: fakeSpeech(String(body['input'])) };
    case '/v1/audio/transcriptions':
    case '/v1/audio/translations': {
      if (body['response_format'] === 'verbose_json')
        return {
          status: 200,
          type: 'application/json',
          data: {
            task: path.endsWith('translations') ? 'translate' : 'transcribe',
            language: 'english',
            duration: FAKE_SECONDS,
            text: FAKE_TRANSCRIPT,
            segments: [
              {
                id: 0,
                seek: 0,
                start: 0,
                end: 1.25,
                text: ' Hello from',
                tokens: [1],
                temperature: 0,
                avg_logprob: -0.1,
                compression_ratio: 1,
                no_speech_prob: 0,
              },
              {
                id: 1,
                seek: 0,
                start: 1.25,
                end: 2,
                text: ' the fake upstream.',
                tokens: [2],
                temperature: 0,
                avg_logprob: -0.1,
                compression_ratio: 1,
                no_speech_prob: 0,
              },
            ],
          },
        };
      return {
        status: 200,
        type: 'application/json',
        data: { text: FAKE_TRANSCRIPT, usage: { type: 'duration', seconds: FAKE_SECONDS } },
      };
    }
    case '/v1/moderations': {
      const input = body['input'];
      const texts = Array.isArray(input) ? input : [input];
      const categories = Object.fromEntries(
        [
          'hate',
          'hate/threatening',
          'harassment',
          'harassment/threatening',
          'illicit',
          'illicit/violent',
          'self-harm',
          'self-harm/intent',
          'self-harm/instructions',
          'sexual',
          'sexual/minors',
          'violence',
          'violence/graphic',
        ].map((c) => [c, false]),
      );
      return {
        status: 200,
        type: 'application/json',
        data: {
          id: 'modr-fake',
          model: String(body['model']),
          results: texts.map(() => ({
            flagged: false,
            categories,
            category_scores: Object.fromEntries(Object.keys(categories).map((c) => [c, 0.001])),
            category_applied_input_types: Object.fromEntries(Object.keys(categories).map((c) => [c, ['text']])),
          })),
        },
      };
    }
    case '/v1/rerank':
    case '/v2/rerank': {
      const documents = body['documents'] as string[];
      const results = documents.map((_, index) => ({ index, relevance_score: 1 / (index + 1) })).reverse();
      return {
        status: 200,
        type: 'application/json',
        data: {
          id: 'rerank-fake',
          results: body['top_n'] === undefined ? results : results.slice(0, Number(body['top_n'])),
          meta: { api_version: { version: '2' }, billed_units: { search_units: 1 } },
        },
      };
    }
    default:
      return {
        status: 404,
        type: 'application/json',
        data: { error: { message: 'not found', type: 'invalid_request_error' } },
      };
  }
}

export async function startFakeMediaUpstream(): Promise<FakeMediaUpstream> {
  const requests: MediaRequestSeen[] = [];
  let failure: { status: number; body: unknown } | undefined;
  let patch: Obj | undefined;
  let cutStream = false;
  let paused: Promise<void> | undefined;
  const server = http.createServer((req, res) => {
    const path = req.url ?? '';
    const multipart = /^multipart\//.test(req.headers['content-type'] ?? '');
    const read = multipart ? readForm(req) : readJson(req).then((body) => ({ body, files: [] }));
    read
      .then(async ({ body, files }) => {
        requests.push({ path, authorization: req.headers.authorization, body, files });
        if (paused !== undefined) await paused;
        if (failure !== undefined) {
          const { status, body: error } = failure;
          failure = undefined;
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(error));
          return;
        }
        if (path === '/v1/audio/transcriptions' && body['stream'] === 'true') {
          // api.openai.com's streamed transcription: `transcript.text.delta` events, then `.done`.
          const cut = cutStream;
          cutStream = false;
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const deltas = FAKE_DELTAS.map(
            (delta) => `data: ${JSON.stringify({ type: 'transcript.text.delta', delta, logprobs: [] })}\n\n`,
          );
          if (cut) {
            // The first delta on the wire, then the connection gone: a failure after the answer began.
            res.write(deltas[0], () => res.socket?.destroy());
            return;
          }
          for (const delta of deltas) res.write(delta);
          res.end(
            `data: ${JSON.stringify({ type: 'transcript.text.done', text: FAKE_TRANSCRIPT, usage: FAKE_STREAM_USAGE })}\n\n`,
          );
          return;
        }
        const out = answer(path, body, files);
        if (patch !== undefined && !Buffer.isBuffer(out.data)) {
          out.data = { ...out.data, ...patch };
          patch = undefined;
        }
        res.writeHead(out.status, { 'content-type': out.type });
        res.end(Buffer.isBuffer(out.data) ? out.data : JSON.stringify(out.data));
      })
      .catch((error: unknown) => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: String(error), type: 'invalid_request_error' } }));
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    root: `http://127.0.0.1:${port}`,
    requests,
    failNext(status, body) {
      failure = { status, body };
    },
    patchNext(fields) {
      patch = fields;
    },
    cutStreamNext() {
      cutStream = true;
    },
    pause() {
      let release = (): void => undefined;
      paused = new Promise<void>((resolve) => {
        release = () => {
          paused = undefined;
          resolve();
        };
      });
      return release;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
