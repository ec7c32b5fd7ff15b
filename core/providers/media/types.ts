/*
 * What the core exchanges with a media upstream (SPEC §14): one call per route, in OpenAI's words
 * (Cohere v2's for rerank). A provider answers with the route's JSON and the facts the bill needs
 * (what was made, the usage the upstream reported); the core holds, settles and shapes the answer.
 * Failures are SvcError `upstream_*` like a ChatProvider's; a content-policy refusal keeps the
 * upstream's message and code (`upstream_invalid_request`).
 */

type Obj = Record<string, unknown>;

/**
 * One uploaded file, as the client sent it, waiting on disk (core/media/spool.ts): an upstream
 * streams it from `path` (`uploadBlob`), or reads it whole where its wire inlines the bytes
 * (`uploadBytes`: Gemini's base64 `inlineData`).
 */
export interface MediaUpload {
  readonly filename: string;
  readonly contentType: string;
  readonly path: string;
  readonly size: number;
}

/** Token usage an upstream reported (token-priced models). */
export interface MediaTokens {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** The input images' tokens among `inputTokens` (a GPT image model's `input_tokens_details.image_tokens`). */
  readonly imageInputTokens?: number;
}

export interface ImageCall {
  /** The upstream's model name. */
  readonly model: string;
  readonly prompt: string;
  readonly n: number;
  /** The client's other parameters (size, quality, background, output_format, …), forwarded. */
  readonly params: Obj;
  /** images/edits: the images and the mask; absent for images/generations. */
  readonly images?: readonly MediaUpload[];
  readonly mask?: MediaUpload;
  /**
   * The client's own request on another wire (the Gemini API's `GenerateContentRequest`): an
   * upstream that speaks that wire sends it as it is and answers `native`; others ignore it.
   */
  readonly native?: NativeRequest;
}

/** A request in another wire's own words, for an upstream that speaks it (pass-through). */
export interface NativeRequest {
  readonly wire: 'gemini';
  readonly body: Obj;
}

export interface ImageResult {
  /** `ImagesResponse`'s `data`: one entry per image made (`b64_json` or `url`). */
  readonly data: readonly Obj[];
  /** The size and quality the upstream says it made, where it says. */
  readonly size?: string;
  readonly quality?: string;
  /** The rest of the upstream's answer (background, output_format, usage), passed on. */
  readonly extra: Obj;
  readonly tokens?: MediaTokens;
  /** The upstream's own answer to a `native` request, passed through (its images are in `data`). */
  readonly native?: Obj;
}

export interface SpeechCall {
  readonly model: string;
  readonly input: string;
  /** voice, response_format, speed, instructions: forwarded. */
  readonly params: Obj;
  /** As ImageCall's. */
  readonly native?: NativeRequest;
}

export interface SpeechResult {
  /** The audio made (empty when a `native` answer carries none: a blocked prompt). */
  readonly audio: Uint8Array;
  readonly contentType: string;
  readonly tokens?: MediaTokens;
  /** The upstream's own answer to a `native` request, passed through. */
  readonly native?: Obj;
}

export interface TranscriptionCall {
  readonly model: string;
  readonly file: MediaUpload;
  /** Translate to English (`/audio/translations`) rather than transcribe. */
  readonly translate: boolean;
  /** What to ask the upstream for: `json` or `verbose_json` (svc renders text, srt and vtt). */
  readonly responseFormat: 'json' | 'verbose_json';
  /** language, prompt, temperature, …: forwarded. */
  readonly params: Obj;
  /** The duration svc read from the file's container, where it could. */
  readonly seconds?: number;
}

/** A transcription streamed as the upstream makes it: each delta event as it comes. */
export type TranscriptDelta = (event: Obj) => void;

export interface TranscriptionResult {
  /** The upstream's JSON answer (`CreateTranscriptionResponseJson` or `…VerboseJson`). */
  readonly json: Obj;
  /** Seconds of audio the upstream reports (verbose `duration`, or `usage.seconds`). */
  readonly seconds?: number;
  readonly tokens?: MediaTokens;
}

export interface ModerationCall {
  readonly model: string;
  readonly input: unknown;
}

export interface ModerationResult {
  /** `CreateModerationResponse`. */
  readonly json: Obj;
  readonly tokens?: MediaTokens;
}

export interface RerankCall {
  readonly model: string;
  readonly query: string;
  readonly documents: readonly string[];
  readonly topN?: number;
  /** The client's other parameters (max_tokens_per_doc, …), forwarded. */
  readonly params: Obj;
}

export interface RerankResult {
  /** Cohere v2's `results`: `{ index, relevance_score }`, best first. */
  readonly results: readonly { index: number; relevance_score: number }[];
  /** `meta.billed_units.search_units`, where the upstream reports it. */
  readonly searchUnits?: number;
  readonly id?: string;
}

/**
 * One media upstream. A provider implements the calls of the kinds it serves; each aborts the
 * upstream request when `signal` fires.
 */
export interface MediaProvider {
  /** "openai", "cohere" or "sandbox", for usage records and logs. */
  readonly name: string;
  image?(call: ImageCall, signal: AbortSignal): Promise<ImageResult>;
  speech?(call: SpeechCall, signal: AbortSignal): Promise<SpeechResult>;
  transcribe?(call: TranscriptionCall, signal: AbortSignal): Promise<TranscriptionResult>;
  /**
   * A transcription streamed (`stream: true`): each `transcript.text.delta` event to `onDelta` as
   * the upstream sends it; resolves with `json` as `{ text, usage?, logprobs? }` from its
   * `transcript.text.done`. A provider without it is asked `transcribe` and its text sent as one
   * delta.
   */
  transcribeStream?(call: TranscriptionCall, signal: AbortSignal, onDelta: TranscriptDelta): Promise<TranscriptionResult>;
  moderate?(call: ModerationCall, signal: AbortSignal): Promise<ModerationResult>;
  rerank?(call: RerankCall, signal: AbortSignal): Promise<RerankResult>;
}
