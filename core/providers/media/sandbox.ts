import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import type { MediaProvider } from './types';
import { SvcError } from '../../errors';

/*
 * The offline media sandbox (SPEC §14): deterministic and labelled, so `svc serve` with no
 * configuration serves every media route. Images are a small PNG whose colours come from the
 * prompt's hash; speech is a short WAV tone whose pitch comes from the input; a transcription is
 * a fixed text; moderation flags the marker word `svc-flag`; rerank orders by word overlap.
 */

/** The word the sandbox moderation flags (as `violence`). */
export const SANDBOX_FLAG_WORD = 'svc-flag';
/** What the sandbox hears in any audio. */
export const SANDBOX_TRANSCRIPT = 'This is the svc sandbox transcription: no model listened to this audio.';
/** The sandbox images' side, in pixels (drawn at 64×64 whatever size is asked). */
export const SANDBOX_IMAGE_SIDE = 64;
/** Sample rate and length of the sandbox's speech. */
const SPEECH_RATE = 24_000;
const SPEECH_SECONDS = 0.5;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n += 1) {
    let c = n;
    for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = (CRC_TABLE[(c ^ b) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A 64×64 RGB PNG: a diagonal blend of two colours taken from the hash of `seed`. */
export function sandboxPng(seed: string): Buffer {
  const hash = createHash('sha256').update(seed).digest();
  const side = SANDBOX_IMAGE_SIDE;
  const raw = Buffer.alloc(side * (1 + side * 3));
  for (let y = 0; y < side; y += 1) {
    const row = y * (1 + side * 3);
    raw[row] = 0; // filter: none
    for (let x = 0; x < side; x += 1) {
      const t = (x + y) / (2 * (side - 1));
      for (let c = 0; c < 3; c += 1) {
        const a = hash[c] as number;
        const b = hash[3 + c] as number;
        raw[row + 1 + x * 3 + c] = Math.round(a + (b - a) * t);
      }
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(side, 0);
  header.writeUInt32BE(side, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // truecolour
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A mono 16-bit PCM WAV of `seconds` of a sine tone at `hz`. */
export function sandboxWav(hz: number, seconds = SPEECH_SECONDS, rate = SPEECH_RATE): Buffer {
  const samples = Math.round(seconds * rate);
  const wav = Buffer.alloc(44 + samples * 2);
  wav.write('RIFF', 0, 'latin1');
  wav.writeUInt32LE(36 + samples * 2, 4);
  wav.write('WAVEfmt ', 8, 'latin1');
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(rate, 24);
  wav.writeUInt32LE(rate * 2, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write('data', 36, 'latin1');
  wav.writeUInt32LE(samples * 2, 40);
  for (let i = 0; i < samples; i += 1)
    wav.writeInt16LE(Math.round(Math.sin((2 * Math.PI * hz * i) / rate) * 8000), 44 + i * 2);
  return wav;
}

const MODERATION_CATEGORIES = [
  'hate',
  'hate/threatening',
  'harassment',
  'harassment/threatening',
  'illicit',
  'illicit/violent',
  'self-harm',
  'self-harm/intent',
  'self-harm/instructions',
  'sexual',
  'sexual/minors',
  'violence',
  'violence/graphic',
] as const;

/** The texts of a moderation `input`: a string, strings, or multimodal parts (their `text`). */
function moderationTexts(input: unknown): string[] {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input)) return [];
  return input.flatMap((item: unknown) => {
    if (typeof item === 'string') return [item];
    const text = (item as { type?: unknown; text?: unknown } | null)?.text;
    return typeof text === 'string' ? [text] : [];
  });
}

/** One moderation result: `violence` when the text carries the marker word. */
function moderationResult(text: string, types: readonly string[]): Record<string, unknown> {
  const flagged = text.toLowerCase().includes(SANDBOX_FLAG_WORD);
  const categories: Record<string, boolean> = {};
  const scores: Record<string, number> = {};
  const applied: Record<string, string[]> = {};
  for (const name of MODERATION_CATEGORIES) {
    const hit = flagged && name === 'violence';
    categories[name] = hit;
    scores[name] = hit ? 0.99 : 0.0001;
    applied[name] = hit ? [...types] : [];
  }
  return { flagged, categories, category_scores: scores, category_applied_input_types: applied };
}

function words(text: string): Set<string> {
  return new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
}

/** The sandbox for every media kind. */
export function createSandboxMediaProvider(): MediaProvider {
  return {
    name: 'sandbox',
    image(call) {
      const data = Array.from({ length: call.n }, (_, i) => ({
        b64_json: sandboxPng(`${call.prompt}\n${i}\n${call.images?.length ?? 0}`).toString('base64'),
        revised_prompt: `[svc sandbox] ${call.prompt}`,
      }));
      return Promise.resolve({ data, extra: { output_format: 'png' } });
    },
    speech(call) {
      const hash = createHash('sha256').update(call.input).digest();
      const hz = 220 + ((hash[0] as number) << 1);
      return Promise.resolve({ audio: sandboxWav(hz), contentType: 'audio/wav' });
    },
    transcribe(call) {
      const seconds = call.seconds ?? 0;
      const text = SANDBOX_TRANSCRIPT;
      const json: Record<string, unknown> =
        call.responseFormat === 'verbose_json'
          ? {
              task: call.translate ? 'translate' : 'transcribe',
              language: 'english',
              duration: seconds,
              text,
              segments: [
                {
                  id: 0,
                  seek: 0,
                  start: 0,
                  end: seconds,
                  text,
                  tokens: [],
                  temperature: 0,
                  avg_logprob: 0,
                  compression_ratio: 1,
                  no_speech_prob: 0,
                },
              ],
            }
          : { text };
      return Promise.resolve({ json, ...(call.seconds === undefined ? {} : { seconds }) });
    },
    async transcribeStream(call, signal, onDelta) {
      // The fixed transcription a word at a time, as a streaming upstream sends it.
      const words = SANDBOX_TRANSCRIPT.split(/(?<= )/);
      for (const delta of words) {
        if (signal.aborted) throw new SvcError('cancelled', 'The call was cancelled.');
        onDelta({ type: 'transcript.text.delta', delta });
      }
      return { json: { text: SANDBOX_TRANSCRIPT }, ...(call.seconds === undefined ? {} : { seconds: call.seconds }) };
    },
    moderate(call) {
      const texts = moderationTexts(call.input);
      const results = (texts.length === 0 ? [''] : texts).map((text) => moderationResult(text, ['text']));
      const id = `modr-sandbox-${createHash('sha256').update(JSON.stringify(call.input)).digest('hex').slice(0, 24)}`;
      return Promise.resolve({ json: { id, model: call.model, results } });
    },
    rerank(call) {
      const query = words(call.query);
      const scored = call.documents.map((document, index) => {
        const doc = words(document);
        let shared = 0;
        for (const word of query) if (doc.has(word)) shared += 1;
        return { index, relevance_score: query.size === 0 ? 0 : shared / query.size };
      });
      scored.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
      const results = call.topN === undefined ? scored : scored.slice(0, call.topN);
      return Promise.resolve({ results, searchUnits: Math.max(1, Math.ceil(call.documents.length / 100)) });
    },
  };
}
