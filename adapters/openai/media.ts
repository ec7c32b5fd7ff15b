import Busboy from '@fastify/busboy';
import type { Context } from 'koa';
import type { CreateMediaResponse, MediaFile } from '../../gen/svc/core/v1/media';
import { invalidArgument, SvcError } from '../../core';

/*
 * The media routes' wire (SPEC §14): JSON bodies (images/generations, audio/speech, moderations,
 * rerank) and multipart forms (images/edits, audio/transcriptions and translations) become the
 * core's `CreateMediaRequest`; its answer goes back as the bytes and media type the core made.
 * A multipart body is counted as it arrives and refused (413 `request_too_large`) the moment it
 * crosses `limits.max_upload_bytes`, never read further.
 */

type Obj = Record<string, unknown>;

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

/** A multipart form: its text fields (`name[]` fields as arrays) and its files. */
export interface MultipartForm {
  readonly fields: Obj;
  readonly files: MediaFile[];
}

/**
 * Reads a `multipart/form-data` body, counting every byte as it comes: past `maxBytes` the
 * request is refused at once (the rest is drained unread), so nothing beyond the bound is held.
 */
export function readMultipart(ctx: Context, maxBytes: number): Promise<MultipartForm> {
  const type = ctx.get('content-type');
  if (!/^multipart\/form-data/i.test(type))
    return Promise.reject(
      invalidArgument('body', `Invalid Content-Type header (${type || 'none'}): this route takes multipart/form-data.`),
    );
  const declared = Number(ctx.get('content-length') || '0');
  if (declared > maxBytes) {
    ctx.req.resume();
    return Promise.reject(tooLarge(maxBytes));
  }
  return new Promise((resolve, reject) => {
    const fields: Obj = {};
    const files: MediaFile[] = [];
    let size = 0;
    let done = false;
    let finished = false;
    let pending = 0;
    let parser: ReturnType<typeof Busboy>;
    try {
      parser = Busboy({
        headers: { ...ctx.req.headers, 'content-type': type },
        limits: { fieldSize: MAX_FIELD_BYTES, fields: 200, files: 20, parts: 220 },
      });
    } catch {
      reject(invalidArgument('body', 'Invalid multipart/form-data body: no boundary.'));
      return;
    }
    const fail = (error: SvcError): void => {
      if (done) return;
      done = true;
      ctx.req.unpipe(parser);
      ctx.req.removeListener('data', count);
      ctx.req.resume();
      reject(error);
    };
    const settle = (): void => {
      if (done || !finished || pending > 0) return;
      done = true;
      resolve({ fields, files });
    };
    const count = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) fail(tooLarge(maxBytes));
    };
    parser.on('field', (name, value, _nameTruncated, valueTruncated) => {
      if (valueTruncated) fail(invalidArgument(name, `Invalid '${name}': longer than ${MAX_FIELD_BYTES} bytes.`));
      if (name.endsWith('[]')) {
        const key = name.slice(0, -2);
        const list = Array.isArray(fields[key]) ? (fields[key] as unknown[]) : [];
        list.push(value);
        fields[key] = list;
      } else fields[name] = value;
    });
    parser.on('file', (name, stream, filename, _encoding, mimeType) => {
      pending += 1;
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        if (!done) chunks.push(chunk);
      });
      stream.on('end', () => {
        pending -= 1;
        files.push({
          field: name.endsWith('[]') ? name.slice(0, -2) : name,
          filename,
          contentType: mimeType,
          data: Buffer.concat(chunks),
        });
        settle();
      });
    });
    parser.on('finish', () => {
      finished = true;
      settle();
    });
    parser.on('error', () => fail(invalidArgument('body', 'Invalid multipart/form-data body.')));
    ctx.req.on('data', count);
    ctx.req.pipe(parser);
  });
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
