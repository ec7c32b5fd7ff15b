import type { ChatCompletionParams } from '../../gen/svc/core/v1/chat';
import { invalidArgument } from '../../core/edge';
import { bad, camel, get, int, isObj, num, present, str, unknownFields, unsupported } from './fields';
import { jsonSchemaOf } from './tools';

/* Gemini's generationConfig → the core's generation parameters. */

/** The most candidates one request may ask for (Gemini's own ceiling). */
export const MAX_CANDIDATES = 8;

const GENERATION_FIELDS = new Set([
  'maxOutputTokens',
  'temperature',
  'topP',
  'topK',
  'candidateCount',
  'stopSequences',
  'responseMimeType',
  'responseSchema',
  'responseJsonSchema',
  '_responseJsonSchema',
  'thinkingConfig',
  'presencePenalty',
  'frequencyPenalty',
  'seed',
  'responseModalities',
  'responseLogprobs',
  'logprobs',
  'enableEnhancedCivicAnswers',
  'speechConfig',
  'mediaResolution',
  'routingConfig',
  'modelSelectionConfig',
  'audioTimestamp',
  'imageConfig',
]);

/** generationConfig fields accepted and not carried out; reported in `x-svc-ignored-fields`. */
const IGNORED_GENERATION = new Set(['topK', 'enableEnhancedCivicAnswers']);

/** What generationConfig asks of the answer beyond the core's parameters. */
export interface Generation {
  readonly includeThoughts: boolean;
  readonly ignored: string[];
}

/**
 * Applies `generationConfig` to `params`. With `nativeOnly` (the body may go to a Gemini upstream
 * as sent), fields the translation cannot carry are named there instead of refused.
 */
export function generation(raw: unknown, params: ChatCompletionParams, nativeOnly?: string[]): Generation {
  const ignored: string[] = [];
  if (!present(raw)) return { includeThoughts: false, ignored };
  if (!isObj(raw)) return bad('generationConfig', 'expected an object.');
  const at = (k: string): string => `generationConfig.${k}`;
  if (nativeOnly === undefined) unknownFields(raw, GENERATION_FIELDS, 'generationConfig');
  else for (const key of Object.keys(raw)) if (!GENERATION_FIELDS.has(camel(key))) nativeOnly.push(at(key));
  const cannot = (field: string, why: string): void => {
    if (nativeOnly === undefined) unsupported(field, why);
    nativeOnly.push(field);
  };
  const v = (k: string): unknown => get(raw, k);
  for (const key of Object.keys(raw)) if (IGNORED_GENERATION.has(camel(key))) ignored.push(at(camel(key)));
  if (present(v('maxOutputTokens'))) params.maxTokens = int(v('maxOutputTokens'), at('maxOutputTokens'), 1);
  if (present(v('temperature'))) params.temperature = num(v('temperature'), at('temperature'));
  if (present(v('topP'))) params.topP = num(v('topP'), at('topP'));
  if (present(v('topK'))) num(v('topK'), at('topK'));
  if (present(v('presencePenalty'))) params.presencePenalty = num(v('presencePenalty'), at('presencePenalty'));
  if (present(v('frequencyPenalty'))) params.frequencyPenalty = num(v('frequencyPenalty'), at('frequencyPenalty'));
  if (present(v('seed'))) params.seed = BigInt(int(v('seed'), at('seed'), Number.MIN_SAFE_INTEGER));
  if (present(v('candidateCount'))) {
    const n = int(v('candidateCount'), at('candidateCount'), 1);
    if (n > MAX_CANDIDATES)
      throw invalidArgument(
        at('candidateCount'),
        `Invalid value at '${at('candidateCount')}': at most ${MAX_CANDIDATES} candidates are served, got ${n}.`,
      );
    params.n = n;
  }
  const stops = v('stopSequences');
  if (present(stops)) {
    if (!Array.isArray(stops)) bad(at('stopSequences'), 'expected a list.');
    params.stop = stops.map((s, i) => str(s, `${at('stopSequences')}[${i}]`));
  }
  for (const key of [
    'responseLogprobs',
    'logprobs',
    'speechConfig',
    'mediaResolution',
    'routingConfig',
    'modelSelectionConfig',
    'audioTimestamp',
    'imageConfig',
  ])
    if (present(v(key)) && v(key) !== false) cannot(at(key), 'it cannot be carried to a chat upstream.');
  const modalities = v('responseModalities');
  if (present(modalities)) {
    if (!Array.isArray(modalities)) bad(at('responseModalities'), 'expected a list.');
    if (modalities.some((m) => m !== 'TEXT')) cannot(at('responseModalities'), 'only TEXT answers are served.');
  }
  const mime = v('responseMimeType');
  const schema = v('responseSchema');
  const jsonSchema = v('responseJsonSchema') ?? raw['_responseJsonSchema'];
  if (present(mime) && mime !== 'text/plain' && mime !== 'application/json')
    unsupported(at('responseMimeType'), "only 'text/plain' and 'application/json' are served.");
  if ((present(schema) || present(jsonSchema)) && mime !== 'application/json')
    bad(at('responseMimeType'), "a response schema needs responseMimeType 'application/json'.");
  if (present(schema) && present(jsonSchema))
    bad(at('responseSchema'), "set either 'responseSchema' or 'responseJsonSchema', not both.");
  if (mime === 'application/json') {
    const s = present(jsonSchema)
      ? isObj(jsonSchema)
        ? jsonSchema
        : bad(at('responseJsonSchema'), 'expected an object.')
      : present(schema)
        ? jsonSchemaOf(schema, at('responseSchema'))
        : undefined;
    params.responseFormat =
      s === undefined
        ? { type: 'json_object' }
        : { type: 'json_schema', jsonSchema: { name: 'response', schema: s, strict: false } };
  }
  let includeThoughts = false;
  const thinking = v('thinkingConfig');
  if (present(thinking)) {
    if (!isObj(thinking)) bad(at('thinkingConfig'), 'expected an object.');
    unknownFields(thinking, new Set(['includeThoughts', 'thinkingBudget', 'thinkingLevel']), at('thinkingConfig'));
    const include = get(thinking, 'includeThoughts');
    if (present(include) && typeof include !== 'boolean')
      bad(at('thinkingConfig.includeThoughts'), 'expected a boolean.');
    includeThoughts = include === true;
    // How hard a chat upstream thinks is the model's own configuration, not the request's.
    for (const key of ['thinkingBudget', 'thinkingLevel'])
      if (present(get(thinking, key))) ignored.push(at(`thinkingConfig.${key}`));
  }
  return { includeThoughts, ignored };
}
