/*
 * Text edits of the fast path (core/chat/fast-path.ts): an upstream's event goes to the client as
 * the JSON text the upstream wrote, with only the model's name replaced in that text, when that
 * can be done without reading the JSON again.
 */

/**
 * `text` (the JSON of `value`-holding object) with the string `from` of its key `key` replaced by
 * the JSON text `toJson`, or undefined when the key is not written exactly once, or not as
 * `"key":"from"` (any spaces around the colon kept).
 */
export function withStringField(text: string, key: string, from: string, toJson: string): string | undefined {
  const name = `"${key}"`;
  const at = text.indexOf(name);
  if (at === -1 || text.indexOf(name, at + name.length) !== -1) return undefined;
  let i = at + name.length;
  while (text.charCodeAt(i) === 32) i++;
  if (text.charCodeAt(i) !== 58) return undefined;
  i++;
  while (text.charCodeAt(i) === 32) i++;
  const value = JSON.stringify(from);
  if (!text.startsWith(value, i)) return undefined;
  return text.slice(0, i) + toJson + text.slice(i + value.length);
}

/** Where a top-level member's value lies in the JSON text: [start, end). */
export interface Span {
  readonly start: number;
  readonly end: number;
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

export function skipSpace(text: string, at: number): number {
  while (at < text.length && isSpace(text.charCodeAt(at))) at++;
  return at;
}

/** The end of the string that opens at `at` (just past its closing quote), or -1. */
export function stringEnd(text: string, at: number): number {
  let from = at + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote === -1) return -1;
    let slashes = 0;
    while (text.charCodeAt(quote - 1 - slashes) === 0x5c) slashes++;
    if (slashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** The end of the value that begins at `at` (text JSON.parse accepted), or -1. */
export function valueEnd(text: string, at: number): number {
  const first = text.charCodeAt(at);
  if (first === 0x22) return stringEnd(text, at);
  if (first !== 0x7b && first !== 0x5b) {
    // A number or a literal: up to the next delimiter.
    let end = at;
    while (end < text.length) {
      const c = text.charCodeAt(end);
      if (c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c)) break;
      end++;
    }
    return end;
  }
  let depth = 0;
  let i = at;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = stringEnd(text, i);
      if (i === -1) return -1;
      continue;
    }
    if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i + 1;
    }
    i++;
  }
  return -1;
}

/** The top-level members of a JSON object's text that a caller asked for, and its shape. */
export interface Members {
  /** Where each asked-for member's value lies. */
  readonly spans: ReadonlyMap<string, Span>;
  /** Where the last member's value ends; -1 when the object has none. */
  readonly lastEnd: number;
  /** Where its closing brace is. */
  readonly close: number;
}

/**
 * The spans of the top-level members whose keys `wanted` accepts in the JSON object that opens at
 * `at` (text JSON.parse accepted), or undefined when there is no object there, a key is escaped
 * (it might spell any) or an accepted key is written twice.
 */
export function memberSpans(text: string, at: number, wanted: (key: string) => boolean): Members | undefined {
  if (text.charCodeAt(at) !== 0x7b) return undefined;
  let i = skipSpace(text, at + 1);
  const spans = new Map<string, Span>();
  let lastEnd = -1;
  while (text.charCodeAt(i) === 0x22) {
    const keyEnd = stringEnd(text, i);
    if (keyEnd === -1) return undefined;
    const key = text.slice(i + 1, keyEnd - 1);
    if (key.includes('\\')) return undefined;
    i = skipSpace(text, keyEnd);
    if (text.charCodeAt(i) !== 0x3a) return undefined;
    const start = skipSpace(text, i + 1);
    const end = valueEnd(text, start);
    if (end === -1) return undefined;
    if (wanted(key)) {
      if (spans.has(key)) return undefined;
      spans.set(key, { start, end });
    }
    lastEnd = end;
    i = skipSpace(text, end);
    if (text.charCodeAt(i) !== 0x2c) break;
    i = skipSpace(text, i + 1);
  }
  if (text.charCodeAt(i) !== 0x7d) return undefined;
  return { spans, lastEnd, close: i };
}

/**
 * `text` with the members of the JSON object that opens at `at` (text JSON.parse accepted) set
 * to the JSON texts of `members`: a member the object has is replaced where it is written, one it
 * lacks is added after its last member; `edit` receives the text of a member's value and returns
 * its new text instead (`members` then names what to add where it is missing). Undefined when a
 * key is escaped (it might spell any) or one of those keys is written twice. Returns the whole
 * text edited and where the object ends in it.
 */
export function withMembers(
  text: string,
  at: number,
  members: Readonly<Record<string, string | ((value: string) => string | undefined)>>,
): { text: string; end: number } | undefined {
  const shape = memberSpans(text, at, (key) => Object.hasOwn(members, key));
  if (shape === undefined) return undefined;
  const { spans: found, lastEnd, close } = shape;
  // Edits from the last to the first, so that each span still points where it did.
  const edits: { start: number; end: number; to: string }[] = [];
  let added = '';
  for (const [key, value] of Object.entries(members)) {
    const span = found.get(key);
    if (span === undefined) {
      if (typeof value !== 'string') return undefined;
      added += `${lastEnd === -1 && added === '' ? '' : ','}${JSON.stringify(key)}:${value}`;
      continue;
    }
    const to = typeof value === 'string' ? value : value(text.slice(span.start, span.end));
    if (to === undefined) return undefined;
    edits.push({ ...span, to });
  }
  let out = text;
  if (added !== '') {
    const after = lastEnd === -1 ? close : lastEnd;
    out = out.slice(0, after) + added + out.slice(after);
  }
  edits.sort((a, b) => b.start - a.start);
  for (const e of edits) out = out.slice(0, e.start) + e.to + out.slice(e.end);
  const grown = out.length - text.length;
  return { text: out, end: close + 1 + grown };
}
