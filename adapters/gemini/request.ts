import type { ChatCompletionParams, ChatMessage, ContentPart, Tool } from '../../gen/svc/core/v1/chat';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { invalidArgument, SvcError } from '../../core/errors';

/*
 * Gemini `GenerateContentRequest` JSON → the core's chat params. Only shapes are checked here;
 * the core decides model, limits, price and hold. Google's JSON accepts a field under its
 * camelCase name or its proto (snake_case) name, so both are read; the field named in an error is
 * the camelCase path (`contents[1].parts[0].inlineData.data`).
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camel = (name: string): string => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** A field under its camelCase or its snake_case name. */
function get(o: Obj, name: string): unknown {
  const v = o[name];
  return v === undefined ? o[snake(name)] : v;
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function bad(field: string, message: string): never {
  throw invalidArgument(field, `Invalid value at '${field}': ${message}`);
}

function unsupported(field: string, why: string): never {
  throw new SvcError('unsupported_parameter', `'${field}' is not supported by svc's Gemini-compatible API: ${why}`, {
    param: field,
  });
}

function unknownFields(o: Obj, known: ReadonlySet<string>, at: string): void {
  for (const key of Object.keys(o)) {
    if (known.has(camel(key))) continue;
    const field = at === '' ? key : `${at}.${key}`;
    throw invalidArgument(
      field,
      `Invalid JSON payload received. Unknown name "${key}" at '${at || 'body'}': Cannot find field.`,
    );
  }
}

function str(v: unknown, field: string): string {
  return typeof v === 'string' ? v : bad(field, 'expected a string.');
}

function num(v: unknown, field: string): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : bad(field, 'expected a number.');
}

function int(v: unknown, field: string, min: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) return bad(field, 'expected an integer.');
  if (v < min) return bad(field, `must be at least ${min}, got ${v}.`);
  return v;
}

/** Image types a chat upstream takes as `image_url` data; other media are refused by name. */
export const INLINE_MIME_TYPES: ReadonlySet<string> = new Set([
  'image/png',
  'image/jpeg',
  'image/webp',
  'image/gif',
  'image/heic',
  'image/heif',
]);

/** The most candidates one request may ask for (Gemini's own ceiling). */
export const MAX_CANDIDATES = 8;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2,3})?$/;
const BASE64_URL = /^[A-Za-z0-9_-]*={0,2}$/;

function imagePart(part: Obj, at: string): ContentPart {
  const inline = get(part, 'inlineData');
  if (present(inline)) {
    const f = `${at}.inlineData`;
    if (!isObj(inline)) return bad(f, 'expected an object.');
    const mime = str(get(inline, 'mimeType'), `${f}.mimeType`).toLowerCase();
    if (!INLINE_MIME_TYPES.has(mime))
      throw invalidArgument(
        `${f}.mimeType`,
        `Unsupported MIME type at '${f}.mimeType': ${mime}. svc accepts ${[...INLINE_MIME_TYPES].join(', ')}.`,
      );
    const data = str(get(inline, 'data'), `${f}.data`);
    if (data === '' || !(BASE64.test(data) || (BASE64_URL.test(data) && data.length % 4 !== 1)))
      throw invalidArgument(`${f}.data`, `Invalid value at '${f}.data' (TYPE_BYTES), Base64 decoding failed.`);
    const standard = data.replace(/-/g, '+').replace(/_/g, '/');
    return { part: { $case: 'imageUrl', value: { url: `data:${mime};base64,${standard}`, detail: '' } } };
  }
  const file = get(part, 'fileData');
  const f = `${at}.fileData`;
  if (!isObj(file)) return bad(f, 'expected an object.');
  const uri = str(get(file, 'fileUri'), `${f}.fileUri`);
  const mime = get(file, 'mimeType');
  if (!/^https?:\/\//i.test(uri))
    unsupported(`${f}.fileUri`, 'only http(s) image URLs are served (svc has no Files API).');
  if (present(mime) && !INLINE_MIME_TYPES.has(str(mime, `${f}.mimeType`).toLowerCase()))
    throw invalidArgument(`${f}.mimeType`, `Unsupported MIME type at '${f}.mimeType': ${String(mime)}.`);
  return { part: { $case: 'imageUrl', value: { url: uri, detail: '' } } };
}

const empty = (role: ChatRole): ChatMessage => ({ role, parts: [], name: '', toolCalls: [], toolCallId: '' });

const PART_FIELDS = new Set([
  'text',
  'thought',
  'thoughtSignature',
  'inlineData',
  'fileData',
  'functionCall',
  'functionResponse',
  'executableCode',
  'codeExecutionResult',
  'videoMetadata',
  'partMetadata',
  'mediaResolution',
]);

/** Calls of earlier model turns, for matching each functionResponse to its call. */
interface CallBook {
  readonly open: { id: string; name: string }[];
  next: number;
}

function partsOf(content: Obj, at: string): Obj[] {
  const parts = get(content, 'parts');
  if (!Array.isArray(parts) || parts.length === 0) return bad(`${at}.parts`, 'must contain at least one part.');
  return parts.map((p, j) => {
    const f = `${at}.parts[${j}]`;
    if (!isObj(p)) return bad(f, 'expected an object.');
    unknownFields(p, PART_FIELDS, f);
    if (present(get(p, 'executableCode')) || present(get(p, 'codeExecutionResult')))
      unsupported(`${f}.executableCode`, 'code execution is not served.');
    if (present(get(p, 'videoMetadata'))) unsupported(`${f}.videoMetadata`, 'video input is not served.');
    return p;
  });
}

function modelTurn(parts: Obj[], at: string, book: CallBook): ChatMessage {
  const m = empty(ChatRole.CHAT_ROLE_ASSISTANT);
  const texts: string[] = [];
  parts.forEach((p, j) => {
    const f = `${at}.parts[${j}]`;
    const call = get(p, 'functionCall');
    if (present(call)) {
      if (!isObj(call)) return bad(`${f}.functionCall`, 'expected an object.');
      const name = str(get(call, 'name'), `${f}.functionCall.name`);
      const args = get(call, 'args') ?? {};
      if (!isObj(args)) return bad(`${f}.functionCall.args`, 'expected an object.');
      const given = get(call, 'id');
      // Gemini's API sends calls without ids; clients (Gemini CLI) add their own, or none.
      const id = typeof given === 'string' && given !== '' ? given : `call_${book.next}_${name}`;
      book.next += 1;
      book.open.push({ id, name });
      m.toolCalls.push({ id, type: 'function', function: { name, arguments: JSON.stringify(args) } });
      return undefined;
    }
    // The model's own earlier thoughts are not sent back: chat upstreams take no reasoning as input.
    if (get(p, 'thought') === true) return undefined;
    const text = get(p, 'text');
    if (present(text)) {
      texts.push(str(text, `${f}.text`));
      return undefined;
    }
    if (present(get(p, 'functionResponse')))
      return bad(`${f}.functionResponse`, "a functionResponse belongs in a 'user' turn.");
    if (present(get(p, 'inlineData')) || present(get(p, 'fileData')))
      return unsupported(`${f}.inlineData`, 'media in a model turn cannot be sent to a chat upstream.');
    return undefined;
  });
  if (texts.length > 0) m.content = texts.join('');
  return m;
}

function functionResult(p: Obj, f: string, book: CallBook): ChatMessage {
  const r = get(p, 'functionResponse');
  if (!isObj(r)) return bad(`${f}.functionResponse`, 'expected an object.');
  const name = str(get(r, 'name'), `${f}.functionResponse.name`);
  const id = get(r, 'id');
  let at = -1;
  if (typeof id === 'string' && id !== '') at = book.open.findIndex((c) => c.id === id && c.name === name);
  // Without an id (or with one the model's call did not carry) the oldest open call of that name.
  if (at < 0) at = book.open.findIndex((c) => c.name === name);
  if (at < 0)
    throw invalidArgument(
      `${f}.functionResponse.name`,
      `Invalid value at '${f}.functionResponse.name': no earlier functionCall named '${name}' is waiting for this response.`,
    );
  const [call] = book.open.splice(at, 1);
  const response = get(r, 'response');
  if (present(response) && !isObj(response)) bad(`${f}.functionResponse.response`, 'expected an object.');
  // `{output: "…"}` (what Gemini CLI sends) goes as its text; any other object as its JSON.
  const out =
    isObj(response) && typeof response['output'] === 'string' && Object.keys(response).length === 1
      ? response['output']
      : JSON.stringify(response ?? {});
  return { ...empty(ChatRole.CHAT_ROLE_TOOL), toolCallId: call?.id ?? '', content: out };
}

function userTurn(parts: Obj[], at: string, book: CallBook): ChatMessage[] {
  const out: ChatMessage[] = [];
  const content: ContentPart[] = [];
  parts.forEach((p, j) => {
    const f = `${at}.parts[${j}]`;
    if (present(get(p, 'functionResponse'))) out.push(functionResult(p, f, book));
    else if (present(get(p, 'functionCall'))) bad(`${f}.functionCall`, "a functionCall belongs in a 'model' turn.");
    else if (present(get(p, 'inlineData')) || present(get(p, 'fileData'))) content.push(imagePart(p, f));
    else if (present(get(p, 'text')) && get(p, 'thought') !== true)
      content.push({ part: { $case: 'text', value: str(get(p, 'text'), `${f}.text`) } });
  });
  if (content.length > 0) {
    const user = empty(ChatRole.CHAT_ROLE_USER);
    if (content.every((c) => c.part?.$case === 'text'))
      user.content = content.map((c) => (c.part?.$case === 'text' ? c.part.value : '')).join('');
    else user.parts = content;
    out.push(user);
  }
  return out;
}

/** Google's `Schema` (OpenAPI 3.0 subset, upper-case types) as JSON Schema. */
export function jsonSchemaOf(schema: unknown, at: string): Obj {
  if (!isObj(schema)) return bad(at, 'expected a Schema object.');
  const out: Obj = {};
  for (const [rawKey, value] of Object.entries(schema)) {
    const key = camel(rawKey);
    switch (key) {
      case 'type':
        out['type'] = str(value, `${at}.type`).toLowerCase();
        break;
      case 'nullable':
        break;
      case 'properties': {
        if (!isObj(value)) return bad(`${at}.properties`, 'expected an object.');
        const props: Obj = {};
        for (const [name, sub] of Object.entries(value)) props[name] = jsonSchemaOf(sub, `${at}.properties.${name}`);
        out['properties'] = props;
        break;
      }
      case 'items':
        out['items'] = jsonSchemaOf(value, `${at}.items`);
        break;
      case 'anyOf':
        if (!Array.isArray(value)) return bad(`${at}.anyOf`, 'expected a list.');
        out['anyOf'] = value.map((s, i) => jsonSchemaOf(s, `${at}.anyOf[${i}]`));
        break;
      case 'propertyOrdering':
      case 'example':
        break;
      case 'minItems':
      case 'maxItems':
      case 'minLength':
      case 'maxLength':
      case 'minProperties':
      case 'maxProperties':
        // int64 fields arrive as strings in proto JSON.
        out[key] = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
        break;
      default:
        out[key] = value;
    }
  }
  if (schema['nullable'] === true && typeof out['type'] === 'string') out['type'] = [out['type'], 'null'];
  return out;
}

const DECLARATION_FIELDS = new Set([
  'name',
  'description',
  'parameters',
  'parametersJsonSchema',
  'response',
  'responseJsonSchema',
  'behavior',
]);

function declarations(tools: unknown): { functions: Tool[]; googleSearch: boolean } {
  if (!present(tools)) return { functions: [], googleSearch: false };
  if (!Array.isArray(tools)) return bad('tools', 'expected a list.');
  const functions: Tool[] = [];
  let googleSearch = false;
  tools.forEach((t, i) => {
    const at = `tools[${i}]`;
    if (!isObj(t)) return bad(at, 'expected an object.');
    for (const rawKey of Object.keys(t)) {
      const key = camel(rawKey);
      const value = t[rawKey];
      if (key === 'googleSearch' || key === 'googleSearchRetrieval') {
        googleSearch = true;
        continue;
      }
      if (key !== 'functionDeclarations')
        unsupported(`${at}.${key}`, 'only functionDeclarations and googleSearch tools are served.');
      if (!Array.isArray(value)) return bad(`${at}.functionDeclarations`, 'expected a list.');
      value.forEach((d, j) => {
        const f = `${at}.functionDeclarations[${j}]`;
        if (!isObj(d)) return bad(f, 'expected an object.');
        unknownFields(d, DECLARATION_FIELDS, f);
        const name = str(get(d, 'name'), `${f}.name`);
        const description = get(d, 'description');
        const jsonSchema = get(d, 'parametersJsonSchema');
        const schema = get(d, 'parameters');
        if (present(jsonSchema) && present(schema))
          bad(f, "set either 'parameters' or 'parametersJsonSchema', not both.");
        let parameters: Obj;
        if (present(jsonSchema))
          parameters = isObj(jsonSchema) ? jsonSchema : bad(`${f}.parametersJsonSchema`, 'expected an object.');
        else if (present(schema)) parameters = jsonSchemaOf(schema, `${f}.parameters`);
        else parameters = { type: 'object', properties: {} };
        functions.push({
          type: 'function',
          function: {
            name,
            description: present(description) ? str(description, `${f}.description`) : '',
            parameters,
          },
        });
        return undefined;
      });
    }
    return undefined;
  });
  return { functions, googleSearch };
}

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

interface Generation {
  readonly includeThoughts: boolean;
  readonly ignored: string[];
}

function generation(raw: unknown, params: ChatCompletionParams): Generation {
  const ignored: string[] = [];
  if (!present(raw)) return { includeThoughts: false, ignored };
  if (!isObj(raw)) return bad('generationConfig', 'expected an object.');
  unknownFields(raw, GENERATION_FIELDS, 'generationConfig');
  const at = (k: string): string => `generationConfig.${k}`;
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
    if (present(v(key)) && v(key) !== false) unsupported(at(key), 'it cannot be carried to a chat upstream.');
  const modalities = v('responseModalities');
  if (present(modalities)) {
    if (!Array.isArray(modalities)) bad(at('responseModalities'), 'expected a list.');
    if (modalities.some((m) => m !== 'TEXT')) unsupported(at('responseModalities'), 'only TEXT answers are served.');
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

function toolConfig(raw: unknown, params: ChatCompletionParams): void {
  if (!present(raw)) return;
  if (!isObj(raw)) return bad('toolConfig', 'expected an object.');
  unknownFields(raw, new Set(['functionCallingConfig', 'retrievalConfig']), 'toolConfig');
  if (present(get(raw, 'retrievalConfig')))
    unsupported('toolConfig.retrievalConfig', 'retrieval locations are not served.');
  const fc = get(raw, 'functionCallingConfig');
  if (!present(fc)) return;
  const at = 'toolConfig.functionCallingConfig';
  if (!isObj(fc)) return bad(at, 'expected an object.');
  unknownFields(fc, new Set(['mode', 'allowedFunctionNames']), at);
  const mode = get(fc, 'mode') ?? 'AUTO';
  const allowedRaw = get(fc, 'allowedFunctionNames');
  let allowed: string[] = [];
  if (present(allowedRaw)) {
    if (!Array.isArray(allowedRaw)) return bad(`${at}.allowedFunctionNames`, 'expected a list.');
    allowed = allowedRaw.map((n, i) => str(n, `${at}.allowedFunctionNames[${i}]`));
  }
  const names = new Set(params.tools.map((t) => t.function?.name ?? ''));
  for (const [i, name] of allowed.entries())
    if (!names.has(name))
      throw invalidArgument(
        `${at}.allowedFunctionNames[${i}]`,
        `Invalid value at '${at}.allowedFunctionNames[${i}]': no function '${name}' is declared in tools.`,
      );
  switch (mode) {
    case 'AUTO':
    case 'VALIDATED':
    case 'MODE_UNSPECIFIED':
      params.toolChoice = { choice: { $case: 'mode', value: 'auto' } };
      break;
    case 'NONE':
      params.toolChoice = { choice: { $case: 'mode', value: 'none' } };
      return;
    case 'ANY':
      params.toolChoice =
        allowed.length === 1 && allowed[0] !== undefined
          ? { choice: { $case: 'functionName', value: allowed[0] } }
          : { choice: { $case: 'mode', value: 'required' } };
      break;
    default:
      throw invalidArgument(
        `${at}.mode`,
        `Invalid value at '${at}.mode': expected AUTO, ANY, NONE or VALIDATED, got '${String(mode)}'.`,
      );
  }
  // The model may call only these: the others are not offered to it.
  if (allowed.length > 0) params.tools = params.tools.filter((t) => allowed.includes(t.function?.name ?? ''));
}

const REQUEST_FIELDS = new Set([
  'contents',
  'systemInstruction',
  'tools',
  'toolConfig',
  'generationConfig',
  'safetySettings',
  'cachedContent',
  'labels',
  'model',
]);

/** Top-level fields accepted and not carried out (svc's upstreams apply their own safety policies). */
const IGNORED_REQUEST = new Set(['safetySettings', 'labels']);

export interface ParsedGenerateRequest {
  readonly params: ChatCompletionParams;
  /** Whether the answer shows the upstream's reasoning as `thought` parts. */
  readonly includeThoughts: boolean;
  /** A `googleSearch` tool: served by svc's own web_search (see grounding.ts). */
  readonly googleSearch: boolean;
  /** Fields accepted but not carried out, named in the `x-svc-ignored-fields` header. */
  readonly ignored: readonly string[];
}

/**
 * Parses a generateContent / streamGenerateContent / countTokens body for `model` (from the
 * path). `countTokens` also takes its request wrapped as `{generateContentRequest: {...}}`.
 */
export function parseGenerateRequest(body: unknown, model: string): ParsedGenerateRequest {
  if (!isObj(body)) return bad('body', 'expected a JSON object.');
  unknownFields(body, REQUEST_FIELDS, '');
  if (present(get(body, 'cachedContent')))
    unsupported('cachedContent', 'svc keeps no context caches; send the content itself.');
  const ignored = Object.keys(body)
    .map(camel)
    .filter((k) => IGNORED_REQUEST.has(k));

  const contents = get(body, 'contents');
  if (!Array.isArray(contents) || contents.length === 0)
    throw invalidArgument('contents', "Invalid value at 'contents': contents must not be empty.");

  const messages: ChatMessage[] = [];
  const system = get(body, 'systemInstruction');
  if (present(system)) {
    const parts =
      typeof system === 'string'
        ? [{ text: system }]
        : isObj(system)
          ? partsOf(system, 'systemInstruction')
          : bad('systemInstruction', 'expected a Content object.');
    const text = parts
      .map((p, j) =>
        present(get(p, 'text'))
          ? str(get(p, 'text'), `systemInstruction.parts[${j}].text`)
          : unsupported(`systemInstruction.parts[${j}]`, 'only text parts are served in a system instruction.'),
      )
      .join('\n');
    messages.push({ ...empty(ChatRole.CHAT_ROLE_SYSTEM), content: text });
  }

  const book: CallBook = { open: [], next: 0 };
  contents.forEach((c, i) => {
    const at = `contents[${i}]`;
    if (!isObj(c)) return bad(at, 'expected a Content object.');
    unknownFields(c, new Set(['role', 'parts']), at);
    const role = get(c, 'role') ?? 'user';
    if (role !== 'user' && role !== 'model')
      throw invalidArgument(
        `${at}.role`,
        `Invalid value at '${at}.role': Please use a valid role: user, model. Got '${String(role)}'.`,
      );
    const parts = partsOf(c, at);
    if (role === 'model') messages.push(modelTurn(parts, at, book));
    else messages.push(...userTurn(parts, at, book));
    return undefined;
  });

  const { functions, googleSearch } = declarations(get(body, 'tools'));
  const params: ChatCompletionParams = {
    model,
    messages,
    maxTokens: 0,
    maxTokensParam: 'max_tokens',
    stop: [],
    n: 0,
    tools: functions,
    user: '',
  };
  const gen = generation(get(body, 'generationConfig'), params);
  toolConfig(get(body, 'toolConfig'), params);
  return { params, includeThoughts: gen.includeThoughts, googleSearch, ignored: [...ignored, ...gen.ignored] };
}
