import { parseBuffer } from 'music-metadata';

/*
 * The duration of an uploaded audio file, read from its container (SPEC §14) with music-metadata
 * (pure JavaScript: WAV, MP3, M4A/MP4, OGG/Opus, FLAC, WebM and more). It is what a transcription
 * is held for; a file it cannot read is held at `limits.max_audio_seconds`.
 */

/** Seconds of audio in `data`, or undefined when the container does not say. */
export async function audioSeconds(
  data: Uint8Array,
  contentType: string,
  filename: string,
): Promise<number | undefined> {
  if (data.length === 0) return undefined;
  try {
    const metadata = await parseBuffer(
      data,
      {
        ...(contentType === '' ? {} : { mimeType: contentType }),
        ...(filename === '' ? {} : { path: filename }),
        size: data.length,
      },
      { duration: true, skipCovers: true },
    );
    const seconds = metadata.format.duration;
    return typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
  } catch {
    return undefined;
  }
}
