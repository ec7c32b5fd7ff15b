import type { Logger } from 'pino';
import type { Principal } from '../auth/types';
import type { BillingResult, Meter } from '../billing/types';
import type { MediaKind, ModelConfig, TokenPrice } from '../config/types';
import { imageInputRate } from '../config/tariff';
import { DEFAULT_MAX_AUDIO_SECONDS } from '../config/defaults';
import { tokenCost } from '../chat/pricing';
import { invalidArgument, isSvcError, SvcError } from '../errors';
import { countTokensLinear } from '../providers/llm/tokens';
import type {
  MediaProvider,
  MediaTokens,
  MediaUpload,
  NativeRequest,
  TranscriptionCall,
  TranscriptionResult,
} from '../providers/media/types';
import { audioSeconds } from './audio';
import { billedSeconds, codePoints, dearestEntry, imagePriceEntries, ratedCost, searchesOf } from './pricing';
import { pricingJson } from '../pricing/prices';
import { renderTranscription, type TranscriptFormat } from './transcript';

/*
 * The media calls of SPEC §14 with the wallet in the loop, as chat and embeddings: each request is
 * checked against its model, held for the most it can cost before any upstream is asked, and
 * settled exactly once from what the upstream reports (a failure, a refusal or an image call that
 * made no image releases the hold: nothing charged).
 */

type Obj = Record<string, unknown>;

/** The routes, as `CreateMediaRequest.operation` names them. */
export type MediaOperation =
  | 'images.generations'
  | 'images.edits'
  | 'audio.speech'
  | 'audio.transcriptions'
  | 'audio.translations'
  | 'moderations'
  | 'rerank';

export const OPERATION_KIND: Readonly<Record<MediaOperation, MediaKind>> = {
  'images.generations': 'image',
  'images.edits': 'image',
  'audio.speech': 'speech',
  'audio.transcriptions': 'transcription',
  'audio.translations': 'transcription',
  moderations: 'moderation',
  rerank: 'rerank',
};

/** An uploaded file and the form field it came in. */
export interface MediaFileIn extends MediaUpload {
  readonly field: string;
}

export interface MediaAnswer {
  readonly body: Uint8Array;
  readonly contentType: string;
  readonly billing: BillingResult;
  readonly estimated: boolean;
  readonly inputCharacters: number;
  /** `body` is the upstream's own answer to `MediaRun.native` (passed through). */
  readonly native: boolean;
}

export interface MediaRun {
  readonly principal: Principal;
  readonly requestId: string;
  readonly clientRequestId?: string | undefined;
  readonly signal: AbortSignal;
  /**
   * Where a streamed transcription's `transcript.text.delta` events go as they come (UploadMedia);
   * absent, `stream: true` is refused. The closing `transcript.text.done` is the answer's body.
   */
  readonly onEvent?: (event: Obj) => void;
  /**
   * The client's request on another wire (the Gemini API's, for an image or speech model): an
   * upstream that speaks it is sent it as it is and its answer passed through; `params` still say
   * the call in OpenAI's words, for the hold and for an upstream of another wire.
   */
  readonly native?: NativeRequest;
}

export interface MediaDeps {
  readonly meter: Meter;
  readonly logger: Logger;
  /** `limits.max_audio_seconds`. */
  readonly maxAudioSeconds?: number;
  /** The wall clock in seconds (`created`). */
  readonly nowSeconds?: () => number;
}

/** Tokens an uploaded image counts for at most in a token-priced image model's hold. */
export const IMAGE_INPUT_TOKENS_BOUND = 10_000;
/** Tokens an upstream may add around a prompt (roles, turn markers), for a token-priced hold. */
export const PROMPT_FRAMING_TOKENS = 16;
/** Audio tokens a second of audio counts for at most in a token-priced transcription's hold. */
export const AUDIO_TOKENS_PER_SECOND_BOUND = 50;
/** Most characters a speech input may have (OpenAI's limit). */
export const MAX_SPEECH_CHARACTERS = 4096;
/** Most documents one rerank call may carry. */
export const MAX_RERANK_DOCUMENTS = 10_000;

const IMAGE_PARAMS = new Set([
  'model',
  'prompt',
  'n',
  'size',
  'quality',
  'response_format',
  'style',
  'user',
  'background',
  'moderation',
  'output_compression',
  'output_format',
  'input_fidelity',
  'stream',
  'partial_images',
]);
const SPEECH_PARAMS = new Set(['model', 'input', 'voice', 'instructions', 'response_format', 'speed', 'stream_format']);
const TRANSCRIPTION_PARAMS = new Set([
  'model',
  'language',
  'prompt',
  'response_format',
  'temperature',
  'timestamp_granularities',
  'include',
  'chunking_strategy',
  'stream',
  'known_speaker_names',
  'known_speaker_references',
]);
const MODERATION_PARAMS = new Set(['model', 'input']);
const RERANK_PARAMS = new Set([
  'model',
  'query',
  'documents',
  'top_n',
  'max_tokens_per_doc',
  'return_documents',
  'rank_fields',
]);

function refuseUnknown(params: Obj, known: ReadonlySet<string>): void {
  for (const key of Object.keys(params))
    if (!known.has(key))
      throw new SvcError('unknown_parameter', `Unrecognized request argument supplied: ${key}`, { param: key });
}

function requiredText(params: Obj, name: string): string {
  const value = params[name];
  if (value === undefined || value === null || value === '')
    throw invalidArgument(name, `Missing required parameter: '${name}'.`);
  if (typeof value !== 'string')
    throw new SvcError('invalid_type', `Invalid type for '${name}': expected a string.`, { param: name });
  return value;
}

function optionalText(params: Obj, name: string): string | undefined {
  const value = params[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string')
    throw new SvcError('invalid_type', `Invalid type for '${name}': expected a string.`, { param: name });
  return value;
}

/** An integer field; a multipart form sends it as text. */
function optionalInteger(params: Obj, name: string, min: number, max: number): number | undefined {
  const raw = params[name];
  if (raw === undefined || raw === null || raw === '') return undefined;
  const value = typeof raw === 'string' && /^-?\d{1,9}$/.test(raw) ? Number(raw) : raw;
  if (typeof value !== 'number' || !Number.isInteger(value))
    throw new SvcError('invalid_type', `Invalid type for '${name}': expected an integer.`, { param: name });
  if (value < min)
    throw new SvcError(
      'integer_below_min_value',
      `Invalid '${name}': integer below minimum value. Expected a value >= ${min}, but got ${value} instead.`,
      { param: name },
    );
  if (value > max)
    throw new SvcError(
      'integer_above_max_value',
      `Invalid '${name}': integer above maximum value. Expected a value <= ${max}, but got ${value} instead.`,
      { param: name },
    );
  return value;
}

function isTrue(value: unknown): boolean {
  return value === true || value === 'true';
}

/** Drops `undefined` and the named keys. */
function without(params: Obj, ...names: string[]): Obj {
  const out: Obj = {};
  for (const [key, value] of Object.entries(params)) if (value !== undefined && !names.includes(key)) out[key] = value;
  return out;
}

const JSON_TYPE = 'application/json';

function jsonBody(value: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/** The GPT image models answer in base64 always, and refuse `response_format` (SPEC §14). */
function base64Only(model: ModelConfig): boolean {
  return model.upstreams.every((u) => u.provider === 'sandbox' || /^(chatgpt-image|gpt-image)/.test(u.upstreamModel));
}

const IMAGE_SIZES = new Set(['1024x1024', '1024x1536', '1536x1024']);
const IMAGE_QUALITIES = new Set(['low', 'medium', 'high']);

/** What one upstream call made and what it costs. */
interface CallOutcome {
  readonly body: Uint8Array;
  readonly contentType: string;
  readonly cost: bigint;
  readonly tokens?: MediaTokens;
  /** The cost is not known from the upstream: charged at the hold (or svc's own count). */
  readonly estimated: boolean;
  /** No result (an image call that made no image): charged nothing, recorded `empty`. */
  readonly empty?: boolean;
  /** What the call is billed by, for the usage record: images, characters, seconds, searches. */
  readonly units?: number;
  /** An image call priced per image: the `SIZE/QUALITY` entry each image was charged at. */
  readonly imagePrice?: string;
  /** `body` is the upstream's own answer on `run.native`'s wire. */
  readonly native?: boolean;
}

/**
 * Runs one media call: validates, holds, calls the (routed) provider, settles once. `model` is as
 * priced at the call's admission (a dollar-priced model at the rate and margin in force then,
 * core/pricing/book.ts): its hold and its settle both read that price.
 */
export async function runMedia(
  deps: MediaDeps,
  model: ModelConfig,
  provider: MediaProvider,
  operation: MediaOperation,
  params: Obj,
  files: readonly MediaFileIn[],
  run: MediaRun,
): Promise<MediaAnswer> {
  const kind = OPERATION_KIND[operation];
  const price = model.mediaPrice ?? { form: 'tokens' as const };
  const tokenCostOf = (tokens: MediaTokens): bigint =>
    tokenCost(model.price, tokens.inputTokens, tokens.outputTokens, tokens.imageInputTokens ?? 0);

  // ---- validation and the hold, before anything is held or sent --------------------------
  let hold: bigint;
  let call: (signal: AbortSignal) => Promise<CallOutcome>;
  let inputCharacters = 0;

  if (kind === 'image') {
    refuseUnknown(params, IMAGE_PARAMS);
    const prompt = requiredText(params, 'prompt');
    const n = optionalInteger(params, 'n', 1, 10) ?? 1;
    const size = optionalText(params, 'size');
    const quality = optionalText(params, 'quality');
    const format = optionalText(params, 'response_format');
    if (isTrue(params['stream']))
      throw new SvcError('unsupported_value', `Unsupported value: 'stream' does not support true with this model.`, {
        param: 'stream',
      });
    if (format !== undefined && format !== 'url' && format !== 'b64_json')
      throw invalidArgument('response_format', `Invalid 'response_format': expected 'url' or 'b64_json'.`);
    const b64Only = base64Only(model);
    if (format === 'url' && b64Only)
      throw new SvcError(
        'unsupported_value',
        `Unsupported value: 'response_format' does not support 'url' with the model '${model.id}'; it always answers with b64_json.`,
        { param: 'response_format' },
      );
    const images =
      operation === 'images.edits' ? files.filter((f) => f.field === 'image' || f.field === 'image[]') : undefined;
    const mask = files.find((f) => f.field === 'mask');
    if (images !== undefined && images.length === 0)
      throw invalidArgument('image', `Missing required parameter: 'image'.`);
    if (images !== undefined && images.length > 16)
      throw invalidArgument('image', `Invalid 'image': at most 16 images, got ${images.length}.`);
    let perImage = { key: '', credits: 0n };
    if (price.form === 'per_image') {
      perImage = dearestEntry(imagePriceEntries(model, price.perImage, size, quality));
      hold = BigInt(n) * perImage.credits;
    } else {
      // Per image: an upstream that makes one image per call (Gemini) counts the prompt each time.
      // Every uploaded image (the mask is one too) counts for at most IMAGE_INPUT_TOKENS_BOUND
      // tokens, held at the dearer of image_input_per_1m and input_per_1m: an upstream that does
      // not split its input tokens is settled at the input rate for all of them.
      const text = n * (Buffer.byteLength(prompt, 'utf8') + PROMPT_FRAMING_TOKENS);
      const imageBound = n * ((images?.length ?? 0) + (mask === undefined ? 0 : 1)) * IMAGE_INPUT_TOKENS_BOUND;
      hold = tokenCost(imageHoldPrice(model.price), text + imageBound, n * model.maxOutputTokens, imageBound);
    }
    const forwarded = without(params, 'model', 'prompt', 'n', ...(b64Only ? ['response_format'] : []));
    call = async (signal) => {
      const result = await providerCall(provider.image, 'image').call(
        provider,
        {
          model: '',
          prompt,
          n,
          params: forwarded,
          ...(images === undefined ? {} : { images }),
          ...(mask === undefined ? {} : { mask }),
          ...(run.native === undefined ? {} : { native: run.native }),
        },
        signal,
      );
      // A passed-through answer may carry more images than were asked (a Gemini model can draw
      // several in one turn): it goes to the client whole, and is charged for the `n` held.
      const made = result.data
        .slice(0, n)
        .filter((d) => typeof d['b64_json'] === 'string' || typeof d['url'] === 'string');
      let cost = 0n;
      let estimated = false;
      let each = perImage;
      if (made.length > 0) {
        if (price.form === 'per_image') {
          // The price of what the upstream says it made, else of what was asked (its dearest).
          if (result.size !== undefined || result.quality !== undefined) {
            try {
              each = dearestEntry(
                imagePriceEntries(model, price.perImage, result.size ?? size, result.quality ?? quality),
              );
            } catch {
              each = perImage;
            }
          }
          cost = BigInt(made.length) * each.credits;
        } else if (result.tokens !== undefined) cost = tokenCostOf(result.tokens);
        else {
          cost = hold;
          estimated = true;
        }
      }
      const extra: Obj = {};
      for (const [key, value] of Object.entries(result.extra)) {
        if (key === 'created' || key === 'data') continue;
        if (key === 'size' && !(typeof value === 'string' && IMAGE_SIZES.has(value))) continue;
        if (key === 'quality' && !(typeof value === 'string' && IMAGE_QUALITIES.has(value))) continue;
        extra[key] = value;
      }
      const body =
        result.native !== undefined
          ? jsonBody(result.native)
          : jsonBody({ created: deps.nowSeconds?.() ?? Math.floor(Date.now() / 1000), data: made, ...extra });
      return {
        body,
        contentType: JSON_TYPE,
        cost,
        estimated,
        empty: made.length === 0,
        units: made.length,
        ...(price.form === 'per_image' ? { imagePrice: each.key } : {}),
        native: result.native !== undefined,
        ...(result.tokens === undefined ? {} : { tokens: result.tokens }),
      };
    };
  } else if (kind === 'speech') {
    refuseUnknown(params, SPEECH_PARAMS);
    const input = requiredText(params, 'input');
    requiredText(params, 'voice');
    inputCharacters = codePoints(input);
    if (inputCharacters > MAX_SPEECH_CHARACTERS)
      throw invalidArgument(
        'input',
        `Invalid 'input': ${inputCharacters} characters, more than the ${MAX_SPEECH_CHARACTERS} one request may carry.`,
      );
    const streamFormat = optionalText(params, 'stream_format');
    if (streamFormat !== undefined && streamFormat !== 'audio' && streamFormat !== 'sse')
      throw invalidArgument('stream_format', `Invalid 'stream_format': expected 'audio' or 'sse'.`);
    if (price.form === 'per_1m_characters') hold = ratedCost(BigInt(inputCharacters), price.credits, 1_000_000n);
    else hold = tokenCost(model.price, Buffer.byteLength(input, 'utf8') + PROMPT_FRAMING_TOKENS, model.maxOutputTokens);
    const forwarded = without(params, 'model', 'input', 'stream_format');
    call = async (signal) => {
      const result = await providerCall(provider.speech, 'speech').call(
        provider,
        { model: '', input, params: forwarded, ...(run.native === undefined ? {} : { native: run.native }) },
        signal,
      );
      // A passed-through answer with no audio (a blocked prompt) made nothing: it costs nothing.
      if (result.native !== undefined && result.audio.length === 0)
        return {
          body: jsonBody(result.native),
          contentType: JSON_TYPE,
          cost: 0n,
          estimated: false,
          empty: true,
          units: 0,
          native: true,
        };
      let cost: bigint;
      let estimated = false;
      if (price.form === 'per_1m_characters') cost = hold;
      else if (result.tokens !== undefined) cost = tokenCostOf(result.tokens);
      else {
        cost = hold;
        estimated = true;
      }
      return {
        body: result.native !== undefined ? jsonBody(result.native) : result.audio,
        contentType: result.native !== undefined ? JSON_TYPE : result.contentType,
        cost,
        estimated,
        units: inputCharacters,
        native: result.native !== undefined,
        ...(result.tokens === undefined ? {} : { tokens: result.tokens }),
      };
    };
  } else if (kind === 'transcription') {
    refuseUnknown(params, TRANSCRIPTION_PARAMS);
    const translate = operation === 'audio.translations';
    const file = files.find((f) => f.field === 'file');
    if (file === undefined) throw invalidArgument('file', `Missing required parameter: 'file'.`);
    const format = (optionalText(params, 'response_format') ?? 'json') as TranscriptFormat;
    if (!['json', 'text', 'srt', 'vtt', 'verbose_json'].includes(format))
      throw invalidArgument(
        'response_format',
        `Invalid 'response_format': expected one of json, text, srt, verbose_json, vtt.`,
      );
    const stream = isTrue(params['stream']);
    const onEvent = run.onEvent;
    if (stream && onEvent === undefined)
      throw new SvcError(
        'unsupported_value',
        `Unsupported value: 'stream' does not support true on this call; send the file as an upload.`,
        { param: 'stream' },
      );
    if (stream && translate)
      throw new SvcError('unsupported_value', `Unsupported value: translations do not stream.`, { param: 'stream' });
    if (stream && format !== 'json' && format !== 'text')
      throw new SvcError(
        'unsupported_value',
        `Unsupported value: 'response_format' '${format}' does not stream; use 'json' or 'text' with 'stream'.`,
        { param: 'response_format' },
      );
    const limit = deps.maxAudioSeconds ?? DEFAULT_MAX_AUDIO_SECONDS;
    const read = await audioSeconds(file.path, file.size);
    if (read !== undefined && read > limit)
      throw invalidArgument(
        'file',
        `Invalid 'file': ${Math.ceil(read)} seconds of audio, more than the ${limit} seconds one request may carry. Split it.`,
      );
    const heldSeconds = read ?? limit;
    if (price.form === 'per_minute') hold = ratedCost(billedSeconds(heldSeconds), price.credits, 60n);
    else {
      const prompt = optionalText(params, 'prompt') ?? '';
      const input = Math.ceil(heldSeconds) * AUDIO_TOKENS_PER_SECOND_BOUND + Buffer.byteLength(prompt, 'utf8');
      hold = tokenCost(model.price, input, model.maxOutputTokens);
    }
    // svc renders text, srt and vtt itself, from json (text) or verbose_json (the segments).
    const ask = format === 'json' || format === 'text' ? 'json' : 'verbose_json';
    const forwarded = without(params, 'model', 'response_format', 'stream');
    call = async (signal) => {
      const args = {
        model: '',
        file,
        translate,
        responseFormat: ask,
        params: forwarded,
        ...(read === undefined ? {} : { seconds: read }),
      } as const;
      const result =
        stream && onEvent !== undefined
          ? await streamTranscription(provider, args, signal, onEvent)
          : await providerCall(provider.transcribe, 'transcription').call(provider, args, signal);
      const seconds = result.seconds ?? read;
      let cost: bigint;
      let estimated = false;
      if (price.form === 'per_minute') {
        if (seconds !== undefined) cost = ratedCost(billedSeconds(seconds), price.credits, 60n);
        else {
          cost = hold;
          estimated = true;
        }
      } else if (result.tokens !== undefined) cost = tokenCostOf(result.tokens);
      else {
        cost = hold;
        estimated = true;
      }
      const rendered = stream
        ? { body: JSON.stringify(doneEvent(result.json)), contentType: 'text/event-stream' }
        : renderTranscription(result.json, format, seconds);
      return {
        body: Buffer.from(rendered.body, 'utf8'),
        contentType: rendered.contentType,
        cost,
        estimated,
        units: Number(billedSeconds(seconds ?? heldSeconds)),
        ...(result.tokens === undefined ? {} : { tokens: result.tokens }),
      };
    };
  } else if (kind === 'moderation') {
    refuseUnknown(params, MODERATION_PARAMS);
    const input = params['input'];
    if (input === undefined || input === null || input === '' || (Array.isArray(input) && input.length === 0))
      throw invalidArgument('input', `Missing required parameter: 'input'.`);
    if (typeof input !== 'string' && !Array.isArray(input))
      throw new SvcError('invalid_type', `Invalid type for 'input': expected a string or an array.`, {
        param: 'input',
      });
    const texts = (Array.isArray(input) ? input : [input]).flatMap((item: unknown) =>
      typeof item === 'string'
        ? [item]
        : typeof (item as { text?: unknown } | null)?.text === 'string'
          ? [(item as { text: string }).text]
          : [],
    );
    const bytes = texts.reduce((sum, t) => sum + Buffer.byteLength(t, 'utf8'), 0);
    hold = price.form === 'free' ? 0n : tokenCost(model.price, bytes, 0);
    call = async (signal) => {
      const result = await providerCall(provider.moderate, 'moderation').call(provider, { model: '', input }, signal);
      let cost = 0n;
      let estimated = false;
      let tokens = result.tokens;
      if (price.form !== 'free') {
        if (tokens === undefined) {
          tokens = { inputTokens: texts.reduce((sum, t) => sum + countTokensLinear(t), 0), outputTokens: 0 };
          estimated = true;
        }
        cost = tokenCostOf(tokens);
      }
      return {
        body: jsonBody({ ...result.json, model: model.id }),
        contentType: JSON_TYPE,
        cost,
        estimated,
        ...(tokens === undefined ? {} : { tokens }),
      };
    };
  } else {
    refuseUnknown(params, RERANK_PARAMS);
    const query = requiredText(params, 'query');
    const raw = params['documents'];
    if (raw === undefined || raw === null)
      throw invalidArgument('documents', `Missing required parameter: 'documents'.`);
    if (!Array.isArray(raw) || raw.length === 0)
      throw invalidArgument('documents', `Invalid 'documents': expected a non-empty array of strings.`);
    if (raw.length > MAX_RERANK_DOCUMENTS)
      throw invalidArgument(
        'documents',
        `Invalid 'documents': at most ${MAX_RERANK_DOCUMENTS} documents, got ${raw.length}.`,
      );
    const documents = raw.map((item: unknown, i) => {
      if (typeof item === 'string') return item;
      const text = (item as { text?: unknown } | null)?.text;
      if (typeof text === 'string') return text;
      throw new SvcError('invalid_type', `Invalid type for 'documents[${i}]': expected a string.`, {
        param: `documents[${i}]`,
      });
    });
    const topN = optionalInteger(params, 'top_n', 1, MAX_RERANK_DOCUMENTS);
    if (price.form !== 'per_search') throw new SvcError('internal', `rerank model ${model.id} has no per_search price`);
    const searches = searchesOf(documents.length);
    hold = BigInt(searches) * price.credits;
    const forwarded = without(params, 'model', 'query', 'documents', 'top_n', 'return_documents', 'rank_fields');
    call = async (signal) => {
      const result = await providerCall(provider.rerank, 'rerank').call(
        provider,
        { model: '', query, documents, params: forwarded, ...(topN === undefined ? {} : { topN }) },
        signal,
      );
      const units = result.searchUnits ?? searches;
      const cost = BigInt(units) * price.credits;
      const body = {
        id: result.id ?? run.requestId,
        results: (topN === undefined ? result.results : result.results.slice(0, topN)).map((r) => ({
          index: r.index,
          relevance_score: r.relevance_score,
        })),
        meta: { api_version: { version: '2' }, billed_units: { search_units: units } },
      };
      return { body: jsonBody(body), contentType: JSON_TYPE, cost, estimated: false, units };
    };
  }

  // ---- the hold, the call, one settle --------------------------------------------------
  const metered = await deps.meter.begin({
    principal: run.principal,
    requestId: run.requestId,
    clientRequestId: run.clientRequestId,
    kind,
    resource: model.id,
    provider: provider.name,
    maxCost: hold,
    // What the call is priced at, kept on its usage record (SPEC §15): credit prices, and for a
    // model priced from the dollar the dollar prices, rate and margin behind them.
    pricing: pricingJson(model),
  });
  let outcome;
  try {
    outcome = await call(run.signal);
  } catch (error) {
    await metered.fail({
      errorCode: isSvcError(error) ? error.code : 'internal',
      status: run.signal.aborted ? 'cancelled' : 'error',
    });
    throw error;
  }
  const billing = await metered.finish({
    cost: outcome.cost,
    inputTokens: outcome.tokens?.inputTokens ?? 0,
    outputTokens: outcome.tokens?.outputTokens ?? 0,
    ...(outcome.tokens?.imageInputTokens === undefined ? {} : { imageInputTokens: outcome.tokens.imageInputTokens }),
    ...(outcome.units === undefined ? {} : { mediaUnits: outcome.units }),
    ...(outcome.imagePrice === undefined ? {} : { pricing: pricingJson(model, outcome.imagePrice) }),
    status: outcome.empty === true ? 'empty' : 'ok',
    estimated: outcome.estimated,
  });
  return {
    body: outcome.body,
    contentType: outcome.contentType,
    billing,
    estimated: outcome.estimated,
    inputCharacters,
    native: outcome.native === true,
  };
}

/** A token tariff whose input images are priced at the dearer of the image and the text input rates (the hold's). */
function imageHoldPrice(price: TokenPrice): TokenPrice {
  const image = imageInputRate(price);
  return { ...price, imageInputPer1m: image > price.inputPer1m ? image : price.inputPer1m };
}

/** The provider's method for a kind; a provider without it is svc's own misconfiguration. */
function providerCall<A, R>(
  method: ((call: A, signal: AbortSignal) => Promise<R>) | undefined,
  kind: MediaKind,
): { call: (provider: MediaProvider, args: A, signal: AbortSignal) => Promise<R> } {
  return {
    call: (provider, args, signal) => {
      if (method === undefined) throw new SvcError('internal', `provider ${provider.name} serves no ${kind}`);
      return method.call(provider, args, signal);
    },
  };
}

/**
 * A streamed transcription: the upstream's deltas as they come where it streams, else its whole
 * text as one delta. Nothing is settled here: the call's one settle follows the `done`.
 */
async function streamTranscription(
  provider: MediaProvider,
  call: TranscriptionCall,
  signal: AbortSignal,
  onEvent: (event: Obj) => void,
): Promise<TranscriptionResult> {
  if (provider.transcribeStream !== undefined)
    return provider.transcribeStream(call, signal, (event) => onEvent(event));
  const result = await providerCall(provider.transcribe, 'transcription').call(provider, call, signal);
  const text = result.json['text'];
  if (typeof text === 'string' && text !== '') onEvent({ type: 'transcript.text.delta', delta: text });
  return result;
}

/** OpenAI's `transcript.text.done` from a transcription's JSON (`usage` only as tokens, as its schema has it). */
function doneEvent(json: Obj): Obj {
  const usage = json['usage'];
  const tokens = typeof usage === 'object' && usage !== null && (usage as Obj)['type'] === 'tokens';
  return {
    type: 'transcript.text.done',
    text: typeof json['text'] === 'string' ? json['text'] : '',
    ...(json['logprobs'] === undefined ? {} : { logprobs: json['logprobs'] }),
    ...(tokens ? { usage } : {}),
  };
}
