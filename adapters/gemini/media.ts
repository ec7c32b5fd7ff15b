import type { CreateMediaResponse, MediaFile } from '../../gen/svc/core/v1/media';
import { invalidArgument } from '../../core/edge';
import { bad, camel, get, int, isObj, present, str, unsupported, type Obj } from './fields';
import { INLINE_MIME_TYPES } from './request';

/*
 * An image or speech model on the Gemini API (SPEC §14, "the other wires"): `generateContent`
 * becomes one call of the core's MediaService, held and settled as the OpenAI routes' media calls.
 * The client's own request rides along (`native_wire: gemini`): a `gemini` upstream is sent it as
 * it is and its answer comes back as Google wrote it (the `inlineData` parts, `usageMetadata`, a
 * blocked prompt's `promptFeedback`). Any other upstream (`openai`, an Imagen `:predict`, the
 * sandbox) is asked in OpenAI's words, and its image or audio is answered here as `inlineData`
 * parts of one candidate.
 */

export type GeminiMediaKind = 'image' | 'speech';

/** What the core is asked. */
export interface GeminiMediaCall {
  readonly operation: 'images.generations' | 'images.edits' | 'audio.speech';
  /** The call in OpenAI's words (what the hold is computed from). */
  readonly params: Obj;
  /** Images the request carries inline (an edit). */
  readonly files: MediaFile[];
}

/** The voice asked of an upstream that is not Google's when the request names none. */
export const DEFAULT_SPEECH_VOICE = 'alloy';

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** The request fields an image or speech model takes on the Gemini API. */
const MEDIA_FIELDS: ReadonlySet<string> = new Set([
  'contents',
  'systemInstruction',
  'generationConfig',
  'safetySettings',
]);

/** The text of a content's parts, and its inline images (for an image model). */
function readContents(body: Obj, kind: GeminiMediaKind, texts: string[], files: MediaFile[]): void {
  const contents = get(body, 'contents');
  if (!present(contents)) throw invalidArgument('contents', "Missing required parameter: 'contents'.");
  if (!Array.isArray(contents)) bad('contents', 'expected a list.');
  contents.forEach((content: unknown, i) => {
    const at = `contents[${i}]`;
    if (!isObj(content)) bad(at, 'expected an object.');
    const parts = get(content, 'parts');
    if (!Array.isArray(parts)) bad(`${at}.parts`, 'expected a list.');
    parts.forEach((part: unknown, j) => {
      const p = `${at}.parts[${j}]`;
      if (!isObj(part)) bad(p, 'expected an object.');
      if (get(part, 'thought') === true) return;
      const text = get(part, 'text');
      if (present(text)) {
        // A model turn's text too: it is context the upstream reads (and the hold counts).
        texts.push(str(text, `${p}.text`));
        return;
      }
      const inline = get(part, 'inlineData');
      if (present(inline) && kind === 'image') {
        if (!isObj(inline)) bad(`${p}.inlineData`, 'expected an object.');
        const mime = str(get(inline, 'mimeType'), `${p}.inlineData.mimeType`).toLowerCase();
        if (!INLINE_MIME_TYPES.has(mime))
          throw invalidArgument(
            `${p}.inlineData.mimeType`,
            `Unsupported MIME type at '${p}.inlineData.mimeType': ${mime}. An image model takes ${[...INLINE_MIME_TYPES].join(', ')}.`,
          );
        const data = str(get(inline, 'data'), `${p}.inlineData.data`);
        if (data === '' || !BASE64.test(data))
          throw invalidArgument(
            `${p}.inlineData.data`,
            `Invalid value at '${p}.inlineData.data' (TYPE_BYTES), Base64 decoding failed.`,
          );
        // An image the model drew earlier is context for an edit as much as one the user sent.
        files.push({
          field: 'image',
          filename: `image-${files.length + 1}.${mime.slice('image/'.length)}`,
          contentType: mime,
          data: Buffer.from(data.replace(/-/g, '+').replace(/_/g, '/'), 'base64'),
        });
        return;
      }
      const name = Object.keys(part).find((k) => k !== 'thoughtSignature' && k !== 'thought_signature') ?? 'part';
      unsupported(`${p}.${name}`, `a ${kind} model takes text${kind === 'image' ? ' and inline images' : ''} only.`);
    });
  });
}

/** The text of `systemInstruction`, if any. */
function systemText(body: Obj): string {
  const system = get(body, 'systemInstruction');
  if (!present(system)) return '';
  if (!isObj(system)) return bad('systemInstruction', 'expected an object.');
  const parts = get(system, 'parts');
  if (!Array.isArray(parts)) return bad('systemInstruction.parts', 'expected a list.');
  return parts
    .map((part: unknown, i) =>
      isObj(part) && present(get(part, 'text')) ? str(get(part, 'text'), `systemInstruction.parts[${i}].text`) : '',
    )
    .filter((t) => t !== '')
    .join('\n');
}

/** A `generateContent` request to an image or speech model, as the core's media call. */
export function geminiMediaCall(raw: unknown, kind: GeminiMediaKind): GeminiMediaCall {
  if (!isObj(raw)) return bad('body', 'expected a JSON object.');
  // The body may reach Google as it is: nothing that would have Google run (and bill) more than
  // the image or the speech (tools such as googleSearch, a cached context) goes with it.
  for (const key of Object.keys(raw))
    if (!MEDIA_FIELDS.has(camel(key)))
      unsupported(key, `a${kind === 'image' ? 'n' : ''} ${kind} model takes ${[...MEDIA_FIELDS].join(', ')} only.`);
  const texts: string[] = [];
  const files: MediaFile[] = [];
  readContents(raw, kind, texts, files);
  const system = systemText(raw);
  const config = get(raw, 'generationConfig');
  if (present(config) && !isObj(config)) bad('generationConfig', 'expected an object.');
  const setting = (name: string): unknown => (isObj(config) ? get(config, name) : undefined);
  if (kind === 'image') {
    const prompt = [system, ...texts].filter((t) => t !== '').join('\n');
    if (prompt === '')
      throw invalidArgument('contents', "Invalid value at 'contents': an image model needs a text prompt.");
    const count = setting('candidateCount');
    const n = present(count) ? int(count, 'generationConfig.candidateCount', 1) : 1;
    if (n > 10) bad('generationConfig.candidateCount', `at most 10 images one request, got ${n}.`);
    return {
      operation: files.length > 0 ? 'images.edits' : 'images.generations',
      params: { prompt, n, response_format: 'b64_json' },
      files,
    };
  }
  const input = texts.join('\n');
  if (input === '') throw invalidArgument('contents', "Invalid value at 'contents': a speech model needs text to say.");
  const speech = setting('speechConfig');
  const voiceConfig = isObj(speech) ? get(speech, 'voiceConfig') : undefined;
  const prebuilt = isObj(voiceConfig) ? get(voiceConfig, 'prebuiltVoiceConfig') : undefined;
  const voiceName = isObj(prebuilt) ? get(prebuilt, 'voiceName') : undefined;
  return {
    operation: 'audio.speech',
    params: {
      input,
      voice: typeof voiceName === 'string' && voiceName !== '' ? voiceName : DEFAULT_SPEECH_VOICE,
      response_format: 'wav',
      ...(system === '' ? {} : { instructions: system }),
    },
    files,
  };
}

const IMAGE_TYPES: Readonly<Record<string, string>> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/**
 * The core's answer as Google's `GenerateContentResponse`: the upstream's own when it was passed
 * through, else the image(s) or the audio as `inlineData` parts of one candidate.
 */
export function geminiMediaAnswer(result: CreateMediaResponse, kind: GeminiMediaKind): Obj {
  const body = Buffer.from(result.body);
  if (result.native) return JSON.parse(body.toString('utf8')) as Obj;
  const parts: Obj[] = [];
  let usage: Obj | undefined;
  if (kind === 'image') {
    const json = JSON.parse(body.toString('utf8')) as Obj;
    const format = typeof json['output_format'] === 'string' ? json['output_format'] : 'png';
    const mimeType = IMAGE_TYPES[format] ?? 'image/png';
    for (const image of Array.isArray(json['data']) ? (json['data'] as unknown[]) : [])
      if (isObj(image) && typeof image['b64_json'] === 'string')
        parts.push({ inlineData: { mimeType, data: image['b64_json'] } });
    const u = json['usage'];
    if (isObj(u) && typeof u['input_tokens'] === 'number' && typeof u['output_tokens'] === 'number')
      usage = {
        promptTokenCount: u['input_tokens'],
        candidatesTokenCount: u['output_tokens'],
        totalTokenCount: u['input_tokens'] + u['output_tokens'],
      };
  } else if (body.length > 0)
    parts.push({ inlineData: { mimeType: result.contentType, data: body.toString('base64') } });
  return {
    candidates: [
      {
        content: { role: 'model', parts },
        finishReason: parts.length > 0 ? 'STOP' : kind === 'image' ? 'NO_IMAGE' : 'OTHER',
        index: 0,
      },
    ],
    ...(usage === undefined ? {} : { usageMetadata: usage }),
    modelVersion: result.model,
  };
}
