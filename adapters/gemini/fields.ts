import { invalidArgument, SvcError } from '../../core/edge';

/*
 * Reading Google's JSON: a field arrives under its camelCase name or its proto (snake_case) name,
 * and the field named in an error is the camelCase path (`contents[1].parts[0].inlineData.data`).
 */

/** A JSON object. */
export type Obj = Record<string, unknown>;
/** Whether `v` is a JSON object. */
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

// A camelCase name in snake_case.
const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
/** A snake_case name in camelCase. */
export const camel = (name: string): string => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** A field under its camelCase or its snake_case name. */
export function get(o: Obj, name: string): unknown {
  const v = o[name];
  return v === undefined ? o[snake(name)] : v;
}

/** Neither undefined nor null. */
export function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

/** Refuses a field's value (400 INVALID_ARGUMENT naming it). */
export function bad(field: string, message: string): never {
  throw invalidArgument(field, `Invalid value at '${field}': ${message}`);
}

/** Refuses a field svc cannot carry out (400 naming it). */
export function unsupported(field: string, why: string): never {
  throw new SvcError('unsupported_parameter', `'${field}' is not supported by svc's Gemini-compatible API: ${why}`, {
    param: field,
  });
}

/** Refuses a field Google's API would not know, as Google does. */
export function unknownFields(o: Obj, known: ReadonlySet<string>, at: string): void {
  for (const key of Object.keys(o)) {
    if (known.has(camel(key))) continue;
    const field = at === '' ? key : `${at}.${key}`;
    throw invalidArgument(
      field,
      `Invalid JSON payload received. Unknown name "${key}" at '${at || 'body'}': Cannot find field.`,
    );
  }
}

/** A string field. */
export function str(v: unknown, field: string): string {
  return typeof v === 'string' ? v : bad(field, 'expected a string.');
}

/** A number field. */
export function num(v: unknown, field: string): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : bad(field, 'expected a number.');
}

/** An integer field of at least `min`. */
export function int(v: unknown, field: string, min: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) return bad(field, 'expected an integer.');
  if (v < min) return bad(field, `must be at least ${min}, got ${v}.`);
  return v;
}
