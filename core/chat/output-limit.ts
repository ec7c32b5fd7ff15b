import type { ModelConfig } from '../config/types';
import { invalidArgument } from '../errors';

/**
 * OpenAI's answer to an output limit above the model's maximum: a 400 naming the field, not a
 * silent cap (an OpenAI client that asks for more than the model can give is told so). Anthropic's
 * and Google's wires keep being served the maximum (their clients send their own ceilings).
 */
export function refuseAboveModelMax(
  model: Pick<ModelConfig, 'maxOutputTokens'>,
  requested: number,
  param: string,
): void {
  if (requested <= model.maxOutputTokens) return;
  throw invalidArgument(
    param,
    `${param} is too large: ${requested}. This model supports at most ${model.maxOutputTokens} completion tokens, whereas you provided ${requested}.`,
  );
}
