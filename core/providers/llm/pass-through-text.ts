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
  return withJsonField(text, key, JSON.stringify(from), toJson);
}

/**
 * `text` with the value of its key `key`, written as the JSON text `fromJson` (a string as
 * `JSON.stringify` writes it, `true`, `false`, `null`, a number), replaced by `toJson`; undefined
 * when the key is not written exactly once, or not with that value.
 */
export function withJsonField(text: string, key: string, fromJson: string, toJson: string): string | undefined {
  const name = `"${key}"`;
  const at = text.indexOf(name);
  if (at === -1 || text.indexOf(name, at + name.length) !== -1) return undefined;
  let i = at + name.length;
  while (text.charCodeAt(i) === 32) i++;
  if (text.charCodeAt(i) !== 58) return undefined;
  i++;
  while (text.charCodeAt(i) === 32) i++;
  if (!text.startsWith(fromJson, i)) return undefined;
  // A literal or number must end where its text ends (`true` is not the start of `trueish`).
  const after = text.charCodeAt(i + fromJson.length);
  if (
    fromJson.charCodeAt(0) !== 34 &&
    !(after === 44 || after === 125 || after === 32 || after === 93 || Number.isNaN(after))
  )
    return undefined;
  return text.slice(0, i) + toJson + text.slice(i + fromJson.length);
}
