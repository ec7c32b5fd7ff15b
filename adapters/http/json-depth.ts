/**
 * How deep a request's JSON may nest. Bodies cross to the core as protobuf (`Struct` for free-form
 * JSON, three protobuf levels per JSON level), and the protobuf reader refuses more than 100
 * levels with an INTERNAL status; 32 JSON levels stay well inside that and beyond any real
 * request (OpenAI itself caps JSON-schema nesting far lower).
 */
export const MAX_JSON_DEPTH = 32;

/** True when `value` nests objects/arrays deeper than `max`; iterative, so any depth is safe. */
export function exceedsJsonDepth(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}
