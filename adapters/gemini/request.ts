import type { ChatCompletionParams, ChatMessage, ContentPart } from '../../gen/svc/core/v1/chat';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { invalidArgument } from '../../core/edge';
import { bad, camel, get, isObj, present, str, unknownFields, unsupported, type Obj } from './fields';
import { generation } from './generation';
import { declarations, toolConfig } from './tools';

/*
 * Gemini `GenerateContentRequest` JSON → the core's chat params. Only shapes are checked here;
 * the core decides model, limits, price and hold. Google's JSON accepts a field under its
 * camelCase name or its proto (snake_case) name, so both are read; the field named in an error is
 * the camelCase path (`contents[1].parts[0].inlineData.data`).
 */

/** Image types a chat upstream takes as `image_url` data; other media are refused by name. */
export const INLINE_MIME_TYPES: ReadonlySet<string> = new Set([
  'image/png',
  'image/jpeg',
  'image/webp',
  'image/gif',
  'image/heic',
  'image/heif',
]);

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
 * `native`: the body may go to a Gemini upstream as sent, so top-level fields the translation does
 * not know (and `cachedContent`) are named in `params.nativeOnly` instead of refused here.
 */
export function parseGenerateRequest(body: unknown, model: string, native = false): ParsedGenerateRequest {
  if (!isObj(body)) return bad('body', 'expected a JSON object.');
  // Natively, what the translation cannot carry is left to the core: served when the model's
  // upstream is Google's (the body is forwarded as sent), refused otherwise.
  const nativeOnly = native
    ? Object.keys(body).filter(
        (k) => !REQUEST_FIELDS.has(camel(k)) || (camel(k) === 'cachedContent' && present(body[k])),
      )
    : [];
  if (!native) {
    unknownFields(body, REQUEST_FIELDS, '');
    if (present(get(body, 'cachedContent')))
      unsupported('cachedContent', 'svc keeps no context caches; send the content itself.');
  }
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
    // Named as the Gemini API names it, for the core's messages; sent upstream as max_tokens.
    maxTokensParam: 'maxOutputTokens',
    clientWire: 'gemini',
    stop: [],
    n: 0,
    tools: functions,
    user: '',
    nativeOnly,
    nativeHeaders: {},
    passThrough: false,
    includeUsage: false,
  };
  const gen = generation(get(body, 'generationConfig'), params, native ? nativeOnly : undefined);
  toolConfig(get(body, 'toolConfig'), params);
  if (googleSearch && params.n > 1)
    throw invalidArgument(
      'generationConfig.candidateCount',
      "Invalid value at 'generationConfig.candidateCount': a googleSearch request is answered with one candidate.",
    );
  return { params, includeThoughts: gen.includeThoughts, googleSearch, ignored: [...ignored, ...gen.ignored] };
}
