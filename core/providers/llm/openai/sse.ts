import type { Readable } from 'node:stream';

/** What parseSse uses of a Node stream body (undici's), when it is one. */
type NodeBody = AsyncIterable<Uint8Array> &
  Partial<Pick<Readable, 'iterator' | 'destroy' | 'on'>> & { readonly _readableState?: { readonly ended?: boolean } };

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;

const ignore = (): void => undefined;

/**
 * Parses a server-sent-events byte stream incrementally: yields the `data` of each event as soon
 * as its blank line arrives, whatever the chunk boundaries (split lines, split UTF-8 sequences,
 * CRLF, CR or LF). Comments and fields other than `data` are skipped.
 *
 * A consumer that stops early (e.g. at `[DONE]`) gets the body destroyed, as a `for await` over it
 * would, unless the body has already received its end: then there is nothing to release, and
 * destroying it would only build (and format) an abort error per stream.
 */
export async function* parseSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  for await (const batch of parseSseBatches(body)) yield* batch;
}

/**
 * `parseSse` by network read: the `data` of every event whose blank line arrived in one read of
 * the body, in order (reads that complete no event yield nothing). A consumer that handles a
 * read's events together (the fast path, core/chat/fast-path.ts) pays one hop per read, not one
 * per event.
 */
export async function* parseSseBatches(body: AsyncIterable<Uint8Array>): AsyncGenerator<string[]> {
  const node = body as NodeBody;
  const source: AsyncIterable<Uint8Array> =
    typeof node.iterator === 'function' ? node.iterator({ destroyOnReturn: false }) : body;
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  // The data lines of the event so far, joined by LF; undefined before its first one.
  let data: string | undefined;
  const flushLine = (line: string): string | undefined => {
    if (line === '') {
      const event = data;
      data = undefined;
      return event;
    }
    if (line.charCodeAt(0) === COLON) return undefined;
    const colon = line.indexOf(':');
    if (colon === -1 ? line !== 'data' : colon !== 4 || !line.startsWith('data')) return undefined;
    const value = colon === -1 ? '' : line.slice(line.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1);
    data = data === undefined ? value : `${data}\n${value}`;
    return undefined;
  };
  let events: string[] = [];
  let finished = false;
  try {
    for await (const chunk of source) {
      const text = decoder.decode(chunk, { stream: true });
      buffer = buffer === '' ? text : buffer + text;
      let start = 0;
      let cr = buffer.indexOf('\r');
      for (;;) {
        if (cr !== -1 && cr < start) cr = buffer.indexOf('\r', start);
        const lf = buffer.indexOf('\n', start);
        let end: number;
        let next: number;
        if (cr !== -1 && (lf === -1 || cr < lf)) {
          // A lone CR at the very end may be the first half of a CRLF still in flight.
          if (cr === buffer.length - 1) break;
          end = cr;
          next = buffer.charCodeAt(cr + 1) === LF ? cr + 2 : cr + 1;
        } else if (lf !== -1) {
          end = lf;
          next = lf + 1;
        } else break;
        const event = flushLine(buffer.slice(start, end));
        start = next;
        if (event !== undefined) events.push(event);
      }
      if (start > 0) buffer = buffer.slice(start);
      if (events.length > 0) {
        const batch = events;
        events = [];
        yield batch;
      }
    }
    buffer += decoder.decode();
    if (buffer !== '') {
      const event = flushLine(buffer.charCodeAt(buffer.length - 1) === CR ? buffer.slice(0, -1) : buffer);
      if (event !== undefined) events.push(event);
    }
    const last = flushLine('');
    if (last !== undefined) events.push(last);
    if (events.length > 0) yield events;
    finished = true;
  } finally {
    if (!finished && source !== body) {
      // The body is abandoned: whatever error its end brings (e.g. undici's abort when someone
      // destroys it) has nobody left to go to, as with the listener a `for await` leaves behind.
      node.on?.('error', ignore);
      if (node._readableState?.ended !== true) node.destroy?.();
    }
  }
}
