import { createHash, type Hash } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { SvcError } from '../errors';
import type { MediaFileIn } from './runner';

/*
 * Where an uploaded file waits between the client and the upstream (SPEC §14: uploads streamed,
 * bounded). A transcription is held for the audio's duration before any upstream is asked, and
 * the duration of most containers is known only at their end (an MP3 without a Xing header is
 * counted frame by frame, an M4A's `moov` box may come last, a file that says nothing is held at
 * `limits.max_audio_seconds`); a fallback to the next upstream sends the file again. So the file
 * is written to disk as it arrives, never gathered in memory, its duration read from there
 * (music-metadata reads the file, seeking as its container needs) and its bytes streamed from
 * there to the upstream; the directory is removed when the call ends, however it ends.
 */

/** `limits.max_upload_bytes` when none is configured (OpenAI's own limit). */
export const DEFAULT_MAX_UPLOAD_BYTES = 25 * 1024 * 1024;

export function uploadTooLarge(maxBytes: number): SvcError {
  return new SvcError(
    'request_too_large',
    `Request body is larger than the upload limit of ${maxBytes} bytes (limits.max_upload_bytes).`,
  );
}

/** An extension the audio parser knows a container by: the client's, else one for its type. */
const TYPE_EXTENSIONS: Readonly<Record<string, string>> = {
  'audio/wav': '.wav',
  'audio/x-wav': '.wav',
  'audio/wave': '.wav',
  'audio/mpeg': '.mp3',
  'audio/mp3': '.mp3',
  'audio/mp4': '.m4a',
  'audio/x-m4a': '.m4a',
  'audio/ogg': '.ogg',
  'audio/opus': '.opus',
  'audio/flac': '.flac',
  'audio/webm': '.webm',
  'video/webm': '.webm',
  'video/mp4': '.mp4',
  'image/png': '.png',
  'image/jpeg': '.jpg',
  'image/webp': '.webp',
};

function extensionOf(filename: string, contentType: string): string {
  const ext = extname(filename).toLowerCase();
  if (/^\.[a-z0-9]{1,8}$/.test(ext)) return ext;
  return TYPE_EXTENSIONS[contentType.split(';')[0]?.trim().toLowerCase() ?? ''] ?? '';
}

/** A spooled file: the upload as the core passes it on, and its SHA-256 (for an Idempotency-Key). */
export interface SpooledFile extends MediaFileIn {
  readonly sha256: string;
}

export interface UploadSpool {
  /** Begins a file; the bytes written after it are its content. */
  begin(field: string, filename: string, contentType: string): Promise<void>;
  /** The next bytes of the file begun last; refused past `maxBytes` in all. */
  write(chunk: Uint8Array): Promise<void>;
  /** Ends the last file and returns every file, in order. */
  finish(): Promise<SpooledFile[]>;
  /** Removes every file (after the call, or when it failed). */
  close(): Promise<void>;
}

interface Open {
  readonly field: string;
  readonly filename: string;
  readonly contentType: string;
  readonly path: string;
  readonly stream: WriteStream;
  readonly hash: Hash;
  size: number;
}

function ended(stream: WriteStream): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.once('error', reject);
    stream.end(() => resolve());
  });
}

/** A spool for one request's files, at most `maxBytes` of them in all. */
export function createUploadSpool(maxBytes: number): UploadSpool {
  let dir: string | undefined;
  let open: Open | undefined;
  let total = 0;
  const files: SpooledFile[] = [];

  async function close(file: Open): Promise<void> {
    await ended(file.stream);
    files.push({
      field: file.field,
      filename: file.filename,
      contentType: file.contentType,
      path: file.path,
      size: file.size,
      sha256: file.hash.digest('hex'),
    });
  }

  return {
    async begin(field, filename, contentType) {
      if (open !== undefined) await close(open);
      open = undefined;
      dir ??= await mkdtemp(join(tmpdir(), 'svc-upload-'));
      const path = join(dir, `${files.length}${extensionOf(filename, contentType)}`);
      const stream = createWriteStream(path, { flags: 'wx' });
      open = { field, filename, contentType, path, stream, hash: createHash('sha256'), size: 0 };
    },
    async write(chunk) {
      if (open === undefined) throw new SvcError('invalid_argument', 'Invalid upload: file bytes before a file.');
      total += chunk.length;
      if (total > maxBytes) throw uploadTooLarge(maxBytes);
      open.size += chunk.length;
      open.hash.update(chunk);
      const stream = open.stream;
      if (!stream.write(chunk))
        await new Promise<void>((resolve, reject) => {
          const onError = (error: Error): void => {
            stream.off('drain', onDrain);
            reject(error);
          };
          const onDrain = (): void => {
            stream.off('error', onError);
            resolve();
          };
          stream.once('drain', onDrain);
          stream.once('error', onError);
        });
    },
    async finish() {
      if (open !== undefined) await close(open);
      open = undefined;
      return files;
    },
    async close() {
      const last = open;
      open = undefined;
      if (last !== undefined) await ended(last.stream).catch(() => undefined);
      if (dir !== undefined) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      dir = undefined;
    },
  };
}
