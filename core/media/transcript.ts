/*
 * A transcription in the `response_format` the client asked for (SPEC §14). svc asks the upstream
 * for `json` or `verbose_json` and renders `text`, `srt` and `vtt` itself, from the segments where
 * there are any, else as one cue over the whole audio.
 */

type Obj = Record<string, unknown>;

export type TranscriptFormat = 'json' | 'text' | 'srt' | 'vtt' | 'verbose_json';

interface Cue {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

function clock(seconds: number, separator: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

function cuesOf(json: Obj, seconds: number | undefined): Cue[] {
  const text = typeof json['text'] === 'string' ? json['text'] : '';
  const segments = json['segments'];
  if (Array.isArray(segments) && segments.length > 0) {
    const cues = segments.flatMap((item: unknown) => {
      const s = item as { start?: unknown; end?: unknown; text?: unknown } | null;
      if (typeof s?.start !== 'number' || typeof s.end !== 'number' || typeof s.text !== 'string') return [];
      return [{ start: s.start, end: s.end, text: s.text.trim() }];
    });
    if (cues.length > 0) return cues;
  }
  const duration = typeof json['duration'] === 'number' ? json['duration'] : (seconds ?? 0);
  return [{ start: 0, end: duration, text: text.trim() }];
}

/** The body and media type of a transcription in `format`. */
export function renderTranscription(
  json: Obj,
  format: TranscriptFormat,
  seconds: number | undefined,
): { body: string; contentType: string } {
  const text = typeof json['text'] === 'string' ? json['text'] : '';
  switch (format) {
    case 'json': {
      const usage = json['usage'];
      return {
        body: JSON.stringify({
          text,
          ...(usage === undefined ? {} : { usage }),
          ...(json['logprobs'] === undefined ? {} : { logprobs: json['logprobs'] }),
        }),
        contentType: 'application/json',
      };
    }
    case 'verbose_json':
      return {
        body: JSON.stringify({
          ...json,
          duration: typeof json['duration'] === 'number' ? json['duration'] : (seconds ?? 0),
          language: typeof json['language'] === 'string' ? json['language'] : 'english',
          text,
        }),
        contentType: 'application/json',
      };
    case 'text':
      return { body: `${text}\n`, contentType: 'text/plain; charset=utf-8' };
    case 'srt':
      return {
        body: cuesOf(json, seconds)
          .map((c, i) => `${i + 1}\n${clock(c.start, ',')} --> ${clock(c.end, ',')}\n${c.text}\n`)
          .join('\n'),
        contentType: 'text/plain; charset=utf-8',
      };
    case 'vtt':
      return {
        body: `WEBVTT\n\n${cuesOf(json, seconds)
          .map((c) => `${clock(c.start, '.')} --> ${clock(c.end, '.')}\n${c.text}\n`)
          .join('\n')}`,
        contentType: 'text/vtt; charset=utf-8',
      };
  }
}
