import { SvcError } from '../../errors';
import { geminiStatusError } from '../llm/gemini/errors';
import { usageOf } from '../llm/gemini/response';
import { garbageError, transportError, type UpstreamIdentity } from '../llm/openai/errors';
import type { OpenAiProviderOptions } from '../llm/openai/provider';
import { postUpstream, type UpstreamEndpoint } from '../llm/upstream-http';
import type { MediaProvider, MediaTokens, MediaUpload } from './types';
import { uploadBytes } from './upload';

/*
 * Google's Gemini API as a media upstream (SPEC §14): image models through `generateContent` with
 * `responseModalities: ["IMAGE"]` (one image per call, so `n` images are `n` calls), Imagen
 * through `:predict` (`sampleCount: n`), and speech through `generateContent` with
 * `responseModalities: ["AUDIO"]` (24 kHz 16-bit PCM, which svc wraps as a WAV). Usage is
 * `usageMetadata` in tokens; a prompt Google blocks is OpenAI's content-policy refusal.
 */

type Obj = Record<string, unknown>;

function obj(value: unknown): Obj | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Obj) : undefined;
}

/** Gemini's prebuilt voices; any other `voice` (OpenAI's names) gets the default. */
const GEMINI_VOICES = new Set(
  'Zephyr Puck Charon Kore Fenrir Leda Orus Aoede Callirrhoe Autonoe Enceladus Iapetus Umbriel Algieba Despina Erinome Algenib Rasalgethi Laomedeia Achernar Alnilam Schedar Gacrux Pulcherrima Achird Zubenelgenubi Vindemiatrix Sadachbia Sadaltager Sulafat'.split(
    ' ',
  ),
);
export const GEMINI_DEFAULT_VOICE = 'Kore';

/** A WAV around 16-bit little-endian mono PCM at `rate`. */
export function pcmToWav(pcm: Buffer, rate: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([header, pcm]);
}

function policyRefusal(reason: string): SvcError {
  return new SvcError(
    'upstream_invalid_request',
    `Your request was rejected as a result of our safety system (${reason}). Your request may contain content that is not allowed by our safety system.`,
    { details: { upstream_code: 'content_policy_violation' } },
  );
}

interface InlineAnswer {
  readonly parts: { mimeType: string; data: string }[];
  readonly tokens?: MediaTokens;
  /** Why Google made nothing: `promptFeedback.blockReason`, or a safety-like finish with no output. */
  readonly blocked?: string;
}

/** The inline parts of an answer and its usage, and the reason it was blocked if it was. */
function readInline(json: Obj, host: string): InlineAnswer {
  const usage = usageOf(json['usageMetadata']);
  const images = imagePromptTokens(json['usageMetadata']);
  const tokens =
    usage === undefined
      ? undefined
      : {
          inputTokens: usage.prompt_tokens,
          outputTokens: usage.completion_tokens,
          ...(images > 0 ? { imageInputTokens: Math.min(images, usage.prompt_tokens) } : {}),
        };
  const feedback = obj(json['promptFeedback']);
  if (typeof feedback?.['blockReason'] === 'string')
    return { parts: [], blocked: feedback['blockReason'], ...(tokens === undefined ? {} : { tokens }) };
  const candidates = json['candidates'];
  if (!Array.isArray(candidates)) throw garbageError('generateContent answer has no candidates', host);
  const parts: { mimeType: string; data: string }[] = [];
  let finish: string | undefined;
  for (const candidate of candidates) {
    const c = obj(candidate);
    if (typeof c?.['finishReason'] === 'string') finish = c['finishReason'];
    const content = obj(c?.['content']);
    const list = content?.['parts'];
    if (!Array.isArray(list)) continue;
    for (const part of list) {
      const inline = obj(obj(part)?.['inlineData']);
      if (typeof inline?.['data'] === 'string')
        parts.push({
          mimeType: typeof inline['mimeType'] === 'string' ? inline['mimeType'] : '',
          data: inline['data'],
        });
    }
  }
  const blocked =
    parts.length === 0 && finish !== undefined && /SAFETY|PROHIBITED|BLOCKLIST|SPII|RECITATION/.test(finish)
      ? finish
      : undefined;
  return { parts, ...(tokens === undefined ? {} : { tokens }), ...(blocked === undefined ? {} : { blocked }) };
}

/** The inline parts of an answer; a blocked prompt is OpenAI's content-policy refusal. */
function inlineParts(json: Obj, host: string): InlineAnswer {
  const answer = readInline(json, host);
  if (answer.blocked !== undefined) throw policyRefusal(answer.blocked);
  return answer;
}

/** The prompt's image tokens (`usageMetadata.promptTokensDetails`, modality IMAGE): the input images. */
function imagePromptTokens(metadata: unknown): number {
  const details = obj(metadata)?.['promptTokensDetails'];
  if (!Array.isArray(details)) return 0;
  let images = 0;
  for (const detail of details) {
    const entry = obj(detail);
    const n = entry?.['tokenCount'];
    if (entry?.['modality'] === 'IMAGE' && typeof n === 'number' && Number.isInteger(n) && n > 0) images += n;
  }
  return images;
}

/** An upload as Gemini carries it: inline, in base64 (its wire has no streamed upload). */
async function inlineOf(upload: MediaUpload): Promise<Obj> {
  return {
    inlineData: {
      mimeType: upload.contentType || 'image/png',
      data: (await uploadBytes(upload)).toString('base64'),
    },
  };
}

export function createGeminiMediaProvider(options: OpenAiProviderOptions): MediaProvider {
  const base = new URL(options.baseUrl.replace(/\/+$/, '') + '/');
  const host = base.host;
  const who: UpstreamIdentity = {
    host,
    apiKey: options.apiKey,
    upstreamModel: options.upstreamModel,
    modelId: options.modelId,
  };
  const headers: Record<string, string> = { ...options.headers, 'content-type': 'application/json' };
  if (options.apiKey !== undefined && options.apiKey !== '') headers['x-goog-api-key'] = options.apiKey;
  const endpoint: Omit<UpstreamEndpoint, 'url'> = {
    headers,
    dispatcher: options.dispatcher,
    timeoutMs: options.timeoutMs,
    statusError: (status, snippet, answered) => geminiStatusError(status, snippet, who, answered),
  };

  async function call(model: string, method: string, body: unknown, signal: AbortSignal): Promise<Obj> {
    const url = new URL(`models/${encodeURIComponent(model)}:${method}`, base);
    const response = await postUpstream({ ...endpoint, url }, JSON.stringify(body), false, signal);
    let json: unknown;
    try {
      json = await response.body.json();
    } catch (error) {
      throw signal.aborted || (error as { code?: string }).code !== undefined
        ? transportError(error, signal, host)
        : garbageError('body is not JSON', host, error);
    }
    const answer = obj(json);
    if (answer === undefined) throw garbageError('body is not a JSON object', host);
    return answer;
  }

  return {
    name: 'gemini',
    async image(request, signal) {
      if (/^imagen/i.test(request.model)) {
        if (request.images !== undefined)
          throw new SvcError(
            'unsupported_value',
            `Unsupported value: the model '${options.modelId}' does not edit images.`,
            {
              param: 'image',
            },
          );
        const answer = await call(
          request.model,
          'predict',
          { instances: [{ prompt: request.prompt }], parameters: { sampleCount: request.n } },
          signal,
        );
        const predictions = Array.isArray(answer['predictions']) ? answer['predictions'] : [];
        const data = predictions.flatMap((p: unknown) => {
          const b64 = obj(p)?.['bytesBase64Encoded'];
          return typeof b64 === 'string' ? [{ b64_json: b64 }] : [];
        });
        return { data, extra: { output_format: 'png' } };
      }
      if (request.native?.wire === 'gemini') {
        // The Gemini API's own request, passed through: one call, Google's answer as it came (a
        // blocked prompt too: it made no image, so it costs nothing).
        const json = await call(request.model, 'generateContent', request.native.body, signal);
        const answer = readInline(json, host);
        const data = answer.parts.filter((p) => p.mimeType.startsWith('image/')).map((p) => ({ b64_json: p.data }));
        return {
          data,
          extra: {},
          native: json,
          ...(answer.tokens === undefined ? {} : { tokens: answer.tokens }),
        };
      }
      const parts: Obj[] = [{ text: request.prompt }, ...(await Promise.all((request.images ?? []).map(inlineOf)))];
      if (request.mask !== undefined) parts.push(await inlineOf(request.mask));
      const body = { contents: [{ role: 'user', parts }], generationConfig: { responseModalities: ['TEXT', 'IMAGE'] } };
      const data: Obj[] = [];
      let input = 0;
      let output = 0;
      let images = 0;
      let reported = false;
      for (let i = 0; i < request.n; i += 1) {
        const answer = inlineParts(await call(request.model, 'generateContent', body, signal), host);
        const image = answer.parts.find((p) => p.mimeType.startsWith('image/'));
        if (image !== undefined) data.push({ b64_json: image.data });
        if (answer.tokens !== undefined) {
          reported = true;
          input += answer.tokens.inputTokens;
          output += answer.tokens.outputTokens;
          images += answer.tokens.imageInputTokens ?? 0;
        }
      }
      return {
        data,
        extra: { output_format: 'png' },
        ...(reported
          ? {
              tokens: {
                inputTokens: input,
                outputTokens: output,
                ...(images > 0 ? { imageInputTokens: images } : {}),
              },
            }
          : {}),
      };
    },
    async speech(request, signal) {
      if (request.native?.wire === 'gemini') {
        // Passed through: Google's PCM stays as Google sent it (`audio/L16;…`), as its clients expect.
        const json = await call(request.model, 'generateContent', request.native.body, signal);
        const answer = readInline(json, host);
        const audio = answer.parts.find((p) => p.mimeType.startsWith('audio/'));
        return {
          audio: audio === undefined ? Buffer.alloc(0) : Buffer.from(audio.data, 'base64'),
          contentType: audio?.mimeType ?? 'application/octet-stream',
          native: json,
          ...(answer.tokens === undefined ? {} : { tokens: answer.tokens }),
        };
      }
      const voice = typeof request.params['voice'] === 'string' ? request.params['voice'] : '';
      const instructions = typeof request.params['instructions'] === 'string' ? request.params['instructions'] : '';
      const body = {
        contents: [
          {
            role: 'user',
            parts: [{ text: instructions === '' ? request.input : `${instructions}: ${request.input}` }],
          },
        ],
        generationConfig: {
          responseModalities: ['AUDIO'],
          speechConfig: {
            voiceConfig: {
              prebuiltVoiceConfig: { voiceName: GEMINI_VOICES.has(voice) ? voice : GEMINI_DEFAULT_VOICE },
            },
          },
        },
      };
      const answer = inlineParts(await call(request.model, 'generateContent', body, signal), host);
      const audio = answer.parts.find((p) => p.mimeType.startsWith('audio/'));
      if (audio === undefined) throw garbageError('generateContent answer has no audio', host);
      const rate = Number(/rate=(\d+)/.exec(audio.mimeType)?.[1] ?? '24000');
      const pcm = Buffer.from(audio.data, 'base64');
      const wav = /L16|pcm/i.test(audio.mimeType) ? pcmToWav(pcm, rate) : pcm;
      return {
        audio: wav,
        contentType: /L16|pcm/i.test(audio.mimeType) ? 'audio/wav' : audio.mimeType,
        ...(answer.tokens === undefined ? {} : { tokens: answer.tokens }),
      };
    },
  };
}
