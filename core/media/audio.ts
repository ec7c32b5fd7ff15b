import type * as MusicMetadataModule from 'music-metadata';

type MusicMetadata = typeof MusicMetadataModule;

/*
 * The duration of an uploaded audio file, read from its container (SPEC §14) with music-metadata
 * (pure JavaScript: WAV, MP3, M4A/MP4, OGG/Opus, FLAC, WebM and more). It is what a transcription
 * is held for; a file it cannot read is held at `limits.max_audio_seconds`.
 */

let loading: Promise<MusicMetadata> | undefined;

/**
 * music-metadata 11 is ESM only: `require` loads it on Node 20.19 and later (require(esm)); on an
 * older Node (engines allows 20.6) a real dynamic import does, which tsc's CommonJS output would
 * otherwise turn into a `require`. Loaded on the first transcription, not at start-up.
 */
function musicMetadata(): Promise<MusicMetadata> {
  loading ??= (async () => {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, see above
      return require('music-metadata') as MusicMetadata;
    } catch {
      // Without require(esm) the package's import-only exports refuse `require`
      // (ERR_PACKAGE_PATH_NOT_EXPORTED or ERR_REQUIRE_ESM): a real import() under CommonJS output.
      const load = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<MusicMetadata>;
      return load('music-metadata');
    }
  })();
  return loading;
}

/** Seconds of audio in `data`, or undefined when the container does not say. */
export async function audioSeconds(
  data: Uint8Array,
  contentType: string,
  filename: string,
): Promise<number | undefined> {
  if (data.length === 0) return undefined;
  try {
    const { parseBuffer } = await musicMetadata();
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
