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
