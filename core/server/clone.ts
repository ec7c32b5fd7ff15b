/**
 * A deep copy of a message crossing the in-process channel: ts-proto messages are plain objects
 * of primitives, arrays, nested plain objects, byte arrays and dates, which this copies directly,
 * an order of magnitude faster than `structuredClone` (which serialises through V8's value
 * serializer). Anything else (a Map, a class instance) is left to `structuredClone`, so the
 * copy is always as deep as structuredClone's.
 */
export function cloneMessage<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = cloneMessage(value[i] as unknown);
    return out as T;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto === Object.prototype || proto === null) {
    const out: Record<string, unknown> = proto === null ? (Object.create(null) as Record<string, unknown>) : {};
    for (const key of Object.keys(value)) out[key] = cloneMessage((value as Record<string, unknown>)[key]);
    return out as T;
  }
  if (Buffer.isBuffer(value)) return Buffer.from(value) as T;
  if (value instanceof Uint8Array) return new Uint8Array(value) as T;
  if (value instanceof Date) return new Date(value.getTime()) as T;
  return structuredClone(value);
}
