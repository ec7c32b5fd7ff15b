import { openAsBlob } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { MediaUpload } from './types';

/** The upload as a Blob read from disk as it is sent (undici streams it), never whole in memory. */
export function uploadBlob(upload: MediaUpload): Promise<Blob> {
  return openAsBlob(upload.path, { type: upload.contentType || 'application/octet-stream' });
}

/** The upload's bytes, for a wire that carries them inline (Gemini's base64 `inlineData`). */
export function uploadBytes(upload: MediaUpload): Promise<Buffer> {
  return readFile(upload.path);
}
