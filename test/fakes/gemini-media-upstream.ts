import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A fake of Google's Gemini API for media (SPEC §14), on 127.0.0.1:0: `generateContent` answering
 * an image (`responseModalities` with IMAGE) or 24 kHz PCM speech (AUDIO) as `inlineData` parts
 * with `usageMetadata`, and Imagen's `:predict` (`predictions[].bytesBase64Encoded`). A prompt
 * containing `blocked` is blocked as Google blocks it (`promptFeedback.blockReason: SAFETY`).
 */

type Obj = Record<string, unknown>;

export interface GeminiMediaSeen {
  readonly path: string;
  readonly apiKey: string | undefined;
  readonly body: Obj;
}

export interface FakeGeminiMedia {
  /** http://127.0.0.1:PORT/v1beta */
  readonly baseUrl: string;
  readonly requests: GeminiMediaSeen[];
  close(): Promise<void>;
}

/** The usage of each image call and of each speech call. */
export const GEMINI_IMAGE_USAGE = { promptTokenCount: 12, candidatesTokenCount: 1290, totalTokenCount: 1302 };
export const GEMINI_SPEECH_USAGE = { promptTokenCount: 9, candidatesTokenCount: 400, totalTokenCount: 409 };
/** The tokens Gemini counts for each input image (an image of at most 384×384 pixels: 258), reported under `promptTokensDetails`. */
export const GEMINI_INPUT_IMAGE_TOKENS = 258;
/** The PCM the fake speaks: 0.1 s of silence at 24 kHz. */
export const GEMINI_PCM = Buffer.alloc(4800);
export const GEMINI_PNG_B64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';

function answer(path: string, body: Obj): Obj {
  if (path.endsWith(':predict')) {
    const count = Number((body['parameters'] as Obj | undefined)?.['sampleCount'] ?? 1);
    return {
      predictions: Array.from({ length: count }, () => ({ bytesBase64Encoded: GEMINI_PNG_B64, mimeType: 'image/png' })),
    };
  }
  const text = JSON.stringify(body['contents']);
  if (text.includes('blocked'))
    return { promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 5, totalTokenCount: 5 } };
  const modalities = ((body['generationConfig'] as Obj | undefined)?.['responseModalities'] ?? []) as string[];
  if (modalities.includes('AUDIO'))
    return {
      candidates: [
        {
          content: {
            role: 'model',
            parts: [
              { inlineData: { mimeType: 'audio/L16;codec=pcm;rate=24000', data: GEMINI_PCM.toString('base64') } },
            ],
          },
          finishReason: 'STOP',
        },
      ],
      usageMetadata: GEMINI_SPEECH_USAGE,
    };
  return {
    candidates: [
      {
        content: {
          role: 'model',
          parts: [{ text: 'Here is your image.' }, { inlineData: { mimeType: 'image/png', data: GEMINI_PNG_B64 } }],
        },
        finishReason: 'STOP',
      },
    ],
    usageMetadata: imageUsage(text.split('"inlineData"').length - 1),
  };
}

/** An image call's `usageMetadata`: with input images, the prompt's tokens by modality, as Gemini reports them. */
function imageUsage(inputImages: number): Obj {
  if (inputImages === 0) return GEMINI_IMAGE_USAGE;
  const images = inputImages * GEMINI_INPUT_IMAGE_TOKENS;
  const prompt = GEMINI_IMAGE_USAGE.promptTokenCount + images;
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: GEMINI_IMAGE_USAGE.candidatesTokenCount,
    totalTokenCount: prompt + GEMINI_IMAGE_USAGE.candidatesTokenCount,
    promptTokensDetails: [
      { modality: 'TEXT', tokenCount: GEMINI_IMAGE_USAGE.promptTokenCount },
      { modality: 'IMAGE', tokenCount: images },
    ],
    candidatesTokensDetails: [{ modality: 'IMAGE', tokenCount: GEMINI_IMAGE_USAGE.candidatesTokenCount }],
  };
}

export async function startFakeGeminiMedia(): Promise<FakeGeminiMedia> {
  const requests: GeminiMediaSeen[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const path = decodeURIComponent(req.url ?? '');
      const body = JSON.parse(raw) as Obj;
      const key = req.headers['x-goog-api-key'];
      requests.push({ path, apiKey: typeof key === 'string' ? key : undefined, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer(path, body)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1beta`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
