import { invalidArgument } from '../errors';

// What a label must not hide: C0/C1 controls and DEL, line and paragraph separators, the soft
// hyphen, the bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069, which reorder
// what is shown around them: "txt.exe" can be made to read "exe.txt"), zero-width space, word
// joiner and invisible operators, the deprecated format controls, the BOM, interlinear
// annotations and tag characters. Allowed on purpose: ZWNJ (U+200C), which Persian spelling
// needs (می‌خواهم), ZWJ (U+200D) for Persian and emoji sequences, and the directional marks
// LRM/RLM/ALM, which reorder nothing beyond the neutral characters next to them.
const INVISIBLE =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u00ad\u180e\u200b\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\u{e0000}-\u{e007f}]/u;

/** The first control or invisible formatting character in `text` as `U+XXXX`, or undefined. */
export function invisibleIn(text: string): string | undefined {
  const found = INVISIBLE.exec(text)?.[0];
  if (found === undefined) return undefined;
  return `U+${(found.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Refuses a user-supplied label, name or reference that holds a control or invisible formatting
 * character; every domain that stores such text shown back to people checks it here.
 */
export function checkPlainText(param: string, value: string, what: string = param): string {
  const found = invisibleIn(value);
  if (found !== undefined) {
    throw invalidArgument(
      param,
      `${what} may not contain control or invisible formatting characters (found ${found}, e.g. a bidi override or zero-width space).`,
    );
  }
  return value;
}

const MARKUP = /[<>]/;

/** Trims and checks a short text shown back on pages: bounded, no markup, no invisible characters. */
export function cleanText(
  param: string,
  what: string,
  value: string,
  max: number,
  options: { required: boolean },
): string {
  const text = value.trim().normalize('NFC');
  if (options.required && text === '') throw invalidArgument(param, `${what} is required.`);
  if (text.length > max)
    throw invalidArgument(param, `${what} must be at most ${max} characters (this one has ${text.length}).`);
  if (MARKUP.test(text)) throw invalidArgument(param, `${what} may not contain "<" or ">": markup is not allowed.`);
  return checkPlainText(param, text, what);
}

/** A key label as the console and UpdateKey take it: 1-100 characters of plain text. */
export function cleanLabel(value: string): string {
  return cleanText('name', 'The label', value, 100, { required: true });
}
