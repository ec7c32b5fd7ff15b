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

/**
 * Seconds of audio in the file at `path` (a spooled upload, its extension the container's where
 * known), or undefined when the container does not say. music-metadata reads the file from disk,
 * seeking where its container allows: the file is never gathered in memory.
 */
export async function audioSeconds(path: string, size: number): Promise<number | undefined> {
  if (size === 0) return undefined;
  try {
    const { parseFile } = await musicMetadata();
    const metadata = await parseFile(path, { duration: true, skipCovers: true });
    const seconds = metadata.format.duration;
    return typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
  } catch {
    return undefined;
  }
}
