import type { WireMessage, WireTool, WireUsage } from './types';

/*
 * Local token counting, for upstreams that report no usage and for streams cut short.
 *
 * The estimate is deliberately simple and documented rather than model-exact: one token per
 * four UTF-8 bytes of text (OpenAI's rule of thumb for English), rounded up, plus four tokens of
 * framing per message and a flat 85 per image. The upper bound used for the wallet hold counts
 * one token per UTF-8 byte of the serialised request (a byte-level BPE token is never shorter
 * than one byte) plus a generous allowance per image, so a hold can never be too small.
 */

const BYTES_PER_TOKEN = 4;
const MESSAGE_OVERHEAD = 4;
const IMAGE_ESTIMATE = 85;
const IMAGE_UPPER_BOUND = 2000;

export function estimateTextTokens(text: string): number {
  if (text === '') return 0;
  return Math.ceil(Buffer.byteLength(text, 'utf8') / BYTES_PER_TOKEN);
}

function contentText(message: WireMessage): { text: string; images: number } {
  let text = '';
  let images = 0;
  const content = message.content;
  if (typeof content === 'string') text += content;
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (typeof part['text'] === 'string') text += part['text'];
      else if (part.type === 'image_url' || part.type === 'input_image') images += 1;
      else text += JSON.stringify(part);
    }
  }
  if (typeof message.refusal === 'string') text += message.refusal;
  for (const call of message.tool_calls ?? []) text += call.function.name + call.function.arguments;
  return { text, images };
}

/** A realistic estimate of the prompt tokens of a request. */
export function estimatePromptTokens(messages: readonly WireMessage[], tools: readonly WireTool[] = []): number {
  let total = 3;
  for (const message of messages) {
    const { text, images } = contentText(message);
    total += MESSAGE_OVERHEAD + estimateTextTokens(text) + images * IMAGE_ESTIMATE;
  }
  if (tools.length > 0) total += estimateTextTokens(JSON.stringify(tools));
  return total;
}

/** An upper bound of the prompt tokens of a request, for the wallet hold. */
export function promptTokenUpperBound(messages: readonly WireMessage[], tools: readonly WireTool[] = []): number {
  let images = 0;
  for (const message of messages) images += contentText(message).images;
  return (
    Buffer.byteLength(JSON.stringify({ messages, tools }), 'utf8') +
    messages.length * MESSAGE_OVERHEAD +
    images * IMAGE_UPPER_BOUND
  );
}

/** Usage of a completion whose upstream reported none. */
export function estimateUsage(
  messages: readonly WireMessage[],
  tools: readonly WireTool[] | undefined,
  outputText: string,
): WireUsage {
  const prompt = estimatePromptTokens(messages, tools ?? []);
  const completion = estimateTextTokens(outputText);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
