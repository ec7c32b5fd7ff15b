import Busboy from '@fastify/busboy';
import type { Context } from 'koa';
import type { CreateMediaResponse, UploadMediaRequest } from '../../gen/svc/core/v1/media';
import { invalidArgument, SvcError } from '../../core/edge';

/*
 * The media routes' wire (SPEC §14): JSON bodies (images/generations, audio/speech, moderations,
 * rerank) become the core's `CreateMediaRequest`; multipart forms (images/edits,
 * audio/transcriptions and translations) stream to its `UploadMedia` part by part as they arrive.
 * The answer goes back as the bytes and media type the core made. A multipart body is counted as
 * it arrives and refused (413 `request_too_large`) the moment it crosses
 * `limits.max_upload_bytes`, never read further.
 */


/** `limits.max_upload_bytes` when the server is given none (OpenAI's own limit). */
export const DEFAULT_UPLOAD_BYTES = 25 * 1024 * 1024;
/** One text field of a form at most (a prompt, a JSON-encoded value). */
const MAX_FIELD_BYTES = 1024 * 1024;

function tooLarge(maxBytes: number): SvcError {
  return new SvcError(
    'request_too_large',
    `Request body is larger than the upload limit of ${maxBytes} bytes (limits.max_upload_bytes).`,
  );
}

/**
 * A multipart form read as it arrives, as the parts of the core's UploadMedia: each text field,
 * each file's start and its bytes chunk by chunk, in the form's order. Nothing is gathered: a file
 * is pulled from the socket only as fast as the core takes its chunks (the parser and the socket
 * pause meanwhile). Every byte is counted as it comes; past `maxBytes` the parts end with a 413
 * `request_too_large` at once, the rest of the body drained unread.
 */
export interface MultipartUpload {
  readonly parts: AsyncIterable<UploadMediaRequest>;
  /** The client's fault that ended the parts (413, a malformed body), once it happened. */
  failure(): SvcError | undefined;
}

/** Chunks queued ahead of the core before the file stream (and so the socket) is paused. */
const QUEUED_PARTS = 8;

export function readMultipart(ctx: Context, operation: string, maxBytes: number): MultipartUpload {
  const type = ctx.get('content-type');
  let failure: SvcError | undefined;
  const queue: UploadMediaRequest[] = [];
  let finished = false;
  let wake: (() => void) | undefined;
  let paused: { resume(): void } | undefined;
  let first = true;
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const push = (part: Partial<Omit<UploadMediaRequest, 'operation'>>): void => {
    queue.push({ operation: first ? operation : '', fieldsJson: '', chunk: Buffer.alloc(0), ...part });
    first = false;
    notify();
  };
  let size = 0;
  const count = (chunk: Buffer): void => {
    size += chunk.length;
    if (size > maxBytes) fail(tooLarge(maxBytes));
  };
  let parser: ReturnType<typeof Busboy> | undefined;
  const fail = (error: SvcError): void => {
    if (failure !== undefined || finished) return;
    failure = error;
    if (parser !== undefined) ctx.req.unpipe(parser);
    ctx.req.removeListener('data', count);
    ctx.req.resume();
    notify();
  };

  if (!/^multipart\/form-data/i.test(type))
    failure = invalidArgument('body', `Invalid Content-Type header (${type || 'none'}): this route takes multipart/form-data.`);
  else if (Number(ctx.get('content-length') || '0') > maxBytes) {
    ctx.req.resume();
    failure = tooLarge(maxBytes);
  } else {
    try {
      parser = Busboy({
        headers: { ...ctx.req.headers, 'content-type': type },
        limits: { fieldSize: MAX_FIELD_BYTES, fields: 200, files: 20, parts: 220 },
      });
    } catch {
      failure = invalidArgument('body', 'Invalid multipart/form-data body: no boundary.');
    }
  }
  type FileStream = NodeJS.ReadableStream & { resume(): void };
  const waiting: { stream: FileStream; part: Partial<UploadMediaRequest> }[] = [];
  let active: FileStream | undefined;
  let parserDone = false;
  const settle = (): void => {
    if (parserDone && active === undefined && waiting.length === 0) {
      finished = true;
      notify();
    }
  };
  const next = (): void => {
    const file = waiting.shift();
    if (file === undefined) return settle();
    const stream = file.stream;
    active = stream;
    push(file.part);
    stream.on('data', (chunk: Buffer) => {
      if (failure !== undefined) return;
      push({ chunk });
      if (queue.length >= QUEUED_PARTS) {
        stream.pause();
        paused = stream;
      }
    });
    stream.on('end', () => {
      active = undefined;
      next();
    });
    stream.resume();
  };
  if (parser !== undefined) {
    parser.on('field', (name, value, _nameTruncated, valueTruncated) => {
      if (valueTruncated) fail(invalidArgument(name, `Invalid '${name}': longer than ${MAX_FIELD_BYTES} bytes.`));
      const field = name.endsWith('[]') ? { [name.slice(0, -2)]: [value] } : { [name]: value };
      push({ fieldsJson: JSON.stringify(field) });
    });
    // The parser may announce the next file before the last one's bytes are read: each waits,
    // paused, until the one before it ended, so that the core gets one file after another.
    parser.on('file', (name, stream, filename, _encoding, mimeType) => {
      stream.pause();
      const field = name.endsWith('[]') ? name.slice(0, -2) : name;
      waiting.push({ stream, part: { file: { field, filename, contentType: mimeType, data: Buffer.alloc(0) } } });
      if (active === undefined) next();
    });
    parser.on('finish', () => {
      parserDone = true;
      settle();
    });
    parser.on('error', () => fail(invalidArgument('body', 'Invalid multipart/form-data body.')));
    ctx.req.on('data', count);
    ctx.req.pipe(parser);
  }

  async function* parts(): AsyncGenerator<UploadMediaRequest> {
    for (;;) {
      if (failure !== undefined) throw failure;
      const part = queue.shift();
      if (part !== undefined) {
        if (queue.length < QUEUED_PARTS / 2 && paused !== undefined) {
          const stream = paused;
          paused = undefined;
          stream.resume();
        }
        yield part;
        continue;
      }
      if (finished) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  }
  return { parts: parts(), failure: () => failure };
}

/** What a route's answer carries back to the client: the core's bytes, its cost, its labels. */
export function writeMediaAnswer(ctx: Context, result: CreateMediaResponse): void {
  if (result.sandbox) ctx.set('x-svc-sandbox', 'true');
  if (result.estimated) ctx.set('x-svc-estimated', 'true');
  ctx.type = result.contentType;
  ctx.body = Buffer.from(result.body);
}

/**
 * A speech answer as OpenAI's SSE (`stream_format: "sse"`): the audio in base64 `speech.audio.delta`
 * events, then `speech.audio.done` with the usage; the cost in a closing comment.
 */
export function speechEvents(result: CreateMediaResponse, chunkBytes = 16 * 1024): string[] {
  const events: string[] = [];
  const audio = Buffer.from(result.body);
  for (let at = 0; at < audio.length; at += chunkBytes)
    events.push(
      JSON.stringify({ type: 'speech.audio.delta', audio: audio.subarray(at, at + chunkBytes).toString('base64') }),
    );
  const input = Number(result.inputCharacters);
  events.push(
    JSON.stringify({
      type: 'speech.audio.done',
      usage: { input_tokens: input, output_tokens: 0, total_tokens: input },
    }),
  );
  return events;
}
