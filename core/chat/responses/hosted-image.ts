import type { Principal } from '../../auth/types';
import type { Meter } from '../../billing/types';
import { isSvcError } from '../../errors';
import type { JsonObject, WireMessage, WireTool, WireToolCall } from '../../providers/llm/types';

/*
 * The hosted image_generation tool of the Responses API (SPEC §14, the other wires), served when
 * `responses.image_generation_model` names an image model: the chat model sees an
 * `image_generation(prompt)` function; when it calls it, svc makes the image on that model between
 * model turns (hosted-loop.ts), held and billed as that image call (its own hold, placed before
 * the first turn, and its own usage record of kind `image`), and the response carries an
 * `image_generation_call` item with the image in base64.
 */

/** The upstream function that stands for the hosted image_generation tool. */
export const HOSTED_IMAGE_GENERATION = 'image_generation';

/** The longest prompt the model may give the image model, in bytes (the hold counts on it). */
export const IMAGE_PROMPT_BYTES = 4000;

/** The tool's options the image call takes (the rest are OpenAI's own, or served otherwise). */
export const IMAGE_TOOL_OPTIONS = [
  'size',
  'quality',
  'background',
  'output_format',
  'output_compression',
  'moderation',
] as const;

export const IMAGE_GENERATION_FUNCTION: WireTool = {
  type: 'function',
  function: {
    name: HOSTED_IMAGE_GENERATION,
    description:
      'Generate an image from a text description. The image is shown to the user as it is made; do not repeat it in your answer, say what you made.',
    parameters: {
      type: 'object',
      properties: {
        prompt: { type: 'string', description: 'A detailed description of the image to generate.' },
      },
      required: ['prompt'],
      additionalProperties: false,
    },
  },
};

/** Who an image call is made for. */
export interface ImageToolCall {
  readonly principal: Principal;
  readonly requestId: string;
  readonly clientRequestId?: string | undefined;
  readonly signal: AbortSignal;
}

/** What one image call made. */
export interface ImageMade {
  /** The image in base64; null when the call made none. */
  readonly result: string | null;
  readonly size?: string;
  readonly quality?: string;
  readonly outputFormat?: string;
  readonly background?: string;
}

/**
 * The image model behind the hosted tool, as the core gives it (core/media/image-tool.ts runs it
 * through the media runner: validated, held and settled as `POST /images/generations`).
 */
export interface ImageGenerator {
  /** The image model's id. */
  readonly modelId: string;
  /** Its provider's name, for the hold's usage record. */
  readonly provider: string;
  /**
   * The generator at the image model's price in force for `accountId` now (SPEC §15: a response is
   * priced once, at its admission; a dollar-priced image model at the stored rate and the margin
   * in force, the account's own included). `bound` and `generate` of the result both read it.
   */
  priced(accountId: string): Promise<ImageGenerator>;
  /** What the image record keeps of the prices it was charged at (SPEC §15's pricing JSON). */
  readonly pricing: string;
  /**
   * The most one call with these tool options can cost (a prompt of IMAGE_PROMPT_BYTES); an
   * option the model does not offer is a 400 naming `${at}.<option>`.
   */
  bound(options: JsonObject, at: string): bigint;
  /** Makes one image, held and charged as a step of `meter`. */
  generate(prompt: string, options: JsonObject, call: ImageToolCall, meter: Meter): Promise<ImageMade>;
}

/** The prompt of an image_generation call ('' when its arguments have none). */
export function promptOf(call: WireToolCall): string {
  try {
    const args: unknown = JSON.parse(call.function.arguments);
    if (typeof args === 'object' && args !== null && typeof (args as JsonObject)['prompt'] === 'string')
      return String((args as JsonObject)['prompt']);
  } catch {
    // A call without a readable prompt fails, and the model is told why.
  }
  return '';
}

/** An `image_generation_call` output item (OpenAI's `ImageGenToolCall`). */
export function imageCallItem(
  id: string,
  status: 'in_progress' | 'generating' | 'completed' | 'failed',
  made?: ImageMade,
  prompt?: string,
): JsonObject {
  return {
    id,
    type: 'image_generation_call',
    status,
    result: made?.result ?? null,
    ...(made === undefined
      ? {}
      : {
          ...(made.background === undefined ? {} : { background: made.background }),
          ...(made.outputFormat === undefined ? {} : { output_format: made.outputFormat }),
          ...(made.quality === undefined ? {} : { quality: made.quality }),
          ...(made.size === undefined ? {} : { size: made.size }),
          ...(prompt === undefined ? {} : { revised_prompt: prompt }),
        }),
  };
}

/**
 * Runs one image call the model asked for, inside `meter` (the response's image hold). A bad
 * prompt, a refused one or an upstream failure goes back to the model as the tool's answer (the
 * item `failed`, nothing charged); the wallet or the key's cap refusing stops the response.
 */
export async function generateImage(
  images: ImageGenerator,
  options: JsonObject,
  call: WireToolCall,
  run: ImageToolCall,
  meter: Meter,
  itemId: string,
): Promise<{ item: JsonObject; failed: boolean; message: WireMessage }> {
  const prompt = promptOf(call).trim();
  const answer = (content: string): WireMessage => ({ role: 'tool', tool_call_id: call.id, content });
  const failed = (why: string) => ({
    item: imageCallItem(itemId, 'failed'),
    failed: true,
    message: answer(`The image was not generated: ${why}`),
  });
  if (prompt === '') return failed('the call gave no prompt.');
  if (Buffer.byteLength(prompt, 'utf8') > IMAGE_PROMPT_BYTES)
    return failed(`the prompt is longer than ${IMAGE_PROMPT_BYTES} bytes; describe the image more briefly.`);
  let made: ImageMade;
  try {
    made = await images.generate(prompt, options, run, meter);
  } catch (error) {
    if (run.signal.aborted || (isSvcError(error) && error.code === 'cancelled')) throw error;
    if (isSvcError(error) && (error.code === 'insufficient_credit' || error.code === 'key_cap_exceeded')) {
      // The response's image hold has no room for another image: the model is told so.
      if (error.details?.['loop'] === 1) return failed('this response may make no more images.');
      throw error;
    }
    return failed(isSvcError(error) && error.code !== 'internal' ? error.message : 'the image model failed.');
  }
  if (made.result === null) return failed('the image model made no image.');
  const what = [made.size, made.outputFormat].filter((v) => v !== undefined).join(' ');
  return {
    item: imageCallItem(itemId, 'completed', made, prompt),
    failed: false,
    message: answer(`The image was generated${what === '' ? '' : ` (${what})`} and is shown to the user.`),
  };
}
