import { z } from 'zod';
import { closest } from '../text/suggest';
import { Decimal } from './decimal';

/**
 * A fraction in the YAML (`0.55`, `1.2e-3`) as its source text: the loader never turns one into a
 * float, so that dollar prices and margins stay exact (SPEC §15); a field that wants a number
 * reads the text.
 */
export class Fraction {
  constructor(readonly text: string) {}
}

/**
 * The building blocks of the configuration file's zod schema (`schema.ts`). zod gives the
 * structure (which keys a mapping has, what is optional, unknown keys refused); these leaves give
 * the words: every refusal names what the value must be and what it was, and never echoes a value
 * that came out of the environment.
 */

/** A string value that came out of `${NAME}` substitution: read like any other, never shown in an error. */
export class EnvText {
  constructor(readonly text: string) {}
}

/** A refusal at `path` (relative to the value being read); turned into a zod issue by `refusing`. */
class Refusal extends Error {
  constructor(
    readonly path: readonly PropertyKey[],
    message: string,
  ) {
    super(message);
  }
}

/** Refuses the value being read (or the key at `path` inside it) with `message`. */
export function refuse(message: string, ...path: PropertyKey[]): never {
  throw new Refusal(path, message);
}

/** Runs `read` for the value at `key`: its refusals name their path from there. */
export function at<T>(key: PropertyKey, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof Refusal) throw new Refusal([key, ...error.path], error.message);
    throw error;
  }
}

type Issue = z.core.$ZodIssue;

/** The key path and the words of a zod issue; an unknown key is named by its own path. */
export function issueAt(issue: Issue): { path: PropertyKey[]; message: string } {
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0] ?? ''] : [...issue.path];
  return { path, message: issue.message };
}

/** `models.svc-pro.upstreams.0.weight`: the form every configuration error names a key in. */
export function keyPath(path: readonly PropertyKey[]): string {
  return path.map(String).join('.');
}

/** Wraps a reader that may `refuse` as a zod transform: the refusal becomes the issue. */
export function refusing<In, Out>(read: (value: In) => Out) {
  return (value: In, ctx: z.core.$RefinementCtx<In>): Out => {
    try {
      return read(value);
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      ctx.issues.push({ code: 'custom', message: error.message, input: value, path: [...error.path] });
      return z.NEVER;
    }
  };
}

/** A leaf of the file: any value, read (and refused) by `read`; an absent key is left undefined. */
export function field<T>(read: (value: unknown) => T) {
  return z.unknown().transform(refusing(read)).optional();
}

/** Parses `value` with `schema` inside a reader; its first issue is the reader's refusal. */
export function within<S extends z.ZodType>(schema: S, value: unknown, ...at: PropertyKey[]): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const first = result.error.issues[0];
  if (first === undefined) return refuse('is invalid', ...at);
  const { path, message } = issueAt(first);
  return refuse(message, ...at, ...path);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype
  );
}

/** A value in words, for "(got …)"; a value from the environment is never shown. */
export function describe(value: unknown): string {
  if (value instanceof EnvText) return 'a value from the environment';
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : `the fraction ${value}`;
  if (typeof value === 'bigint') return String(value);
  if (value instanceof Fraction) return `the fraction ${value.text}`;
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}

/**
 * A mapping with exactly these keys (each optional unless its leaf says otherwise); an unknown key
 * is refused with the ones it could have been, in the order they are documented. `noun` names what
 * a key is ("tool": `unknown tool (expected one of: …)`).
 */
export function mapping<S extends z.core.$ZodLooseShape>(shape: S, noun = 'key') {
  const keys = Object.keys(shape);
  const expected = keys.join(', ');
  const error = (issue: z.core.$ZodRawIssue): string | undefined => {
    if (issue.code !== 'unrecognized_keys') return undefined;
    const near = closest(String((issue as { keys?: readonly string[] }).keys?.[0] ?? ''), keys);
    return near === undefined
      ? `unknown ${noun} (expected one of: ${expected})`
      : `unknown ${noun} (did you mean "${near}"? expected one of: ${expected})`;
  };
  // zod takes any non-array object for a mapping; a value from the environment is never one.
  return z
    .custom<Record<string, unknown>>(isPlainObject, {
      error: (issue) => `must be a mapping (got ${describe(issue.input)})`,
    })
    .pipe(z.strictObject(shape, { error }));
}

/** A mapping keyed by names the file chooses (models, headers): each entry read by `read(name, value)`. */
export function named<T>(read: (name: string, value: unknown) => T) {
  return field((value): Map<string, T> | undefined => {
    if (value === undefined) return undefined;
    if (!isPlainObject(value)) return refuse(`must be a mapping (got ${describe(value)})`);
    const out = new Map<string, T>();
    for (const [name, entry] of Object.entries(value))
      out.set(
        name,
        at(name, () => read(name, entry)),
      );
    return out;
  });
}

/** A list whose items are each read by `read(item, index)`; absent: undefined. */
export function list<T>(what: string, read: (item: unknown, index: number) => T) {
  return field((value): T[] | undefined => {
    if (value === undefined) return undefined;
    if (!Array.isArray(value)) return refuse(`must be a list of ${what} (got ${describe(value)})`);
    return value.map((item: unknown, i) => at(i, () => read(item, i)));
  });
}

/** Text, or undefined when absent; an empty value is refused (with a hint when it came from the environment). */
export function readText(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const text = value instanceof EnvText ? value.text : value;
  if (typeof text !== 'string') return refuse(`must be a string (got ${describe(value)})`);
  if (text.trim() === '')
    return refuse(
      value instanceof EnvText ? 'is empty (check the environment variable it names)' : 'must not be empty',
    );
  return text;
}

export const text = () => field(readText);

export interface Range {
  readonly min?: bigint;
  readonly max?: bigint;
}

// Limits above 2^53 exist only to keep values exact; the message states the lower bound.
function rangeText(range: Range): string {
  if (range.min === 0n) return 'must be a non-negative integer';
  if (range.min === 1n) return 'must be a positive integer';
  if (range.min !== undefined) return `must be an integer of at least ${range.min}`;
  return 'must be an integer';
}

/** An exact integer (YAML integers are read as bigint); text from the environment counts if it is one. */
export function readInteger(value: unknown, range: Range = {}): bigint | undefined {
  if (value === undefined) return undefined;
  let n: bigint;
  if (typeof value === 'bigint') n = value;
  else if (value instanceof EnvText && /^-?\d+$/.test(value.text.trim())) n = BigInt(value.text.trim());
  else return refuse(`${rangeText(range)} (got ${describe(value)})`);
  if (range.min !== undefined && n < range.min) return refuse(`${rangeText(range)} (got ${n})`);
  if (range.max !== undefined && n > range.max) return refuse(`must be at most ${range.max} (got ${n})`);
  return n;
}

export const integer = (range: Range = {}) => field((value) => readInteger(value, range));

/**
 * An exact decimal at least 0 (SPEC §15: dollar prices, margins): a YAML number (its text, never
 * a float) or text from the environment that is one; below 0 refused, and above `max` when given.
 */
export function readDecimal(value: unknown, max?: bigint): Decimal | undefined {
  if (value === undefined) return undefined;
  let n: Decimal | undefined;
  if (typeof value === 'bigint') n = Decimal.of(value);
  else if (value instanceof Fraction || value instanceof EnvText) n = Decimal.parse(value.text);
  const rule = `must be a non-negative number${max === undefined ? '' : ` up to ${max}`}`;
  if (n === undefined) return refuse(`${rule} (got ${describe(value)})`);
  if (n.negative) return refuse(`${rule} (got ${n.toString()})`);
  if (max !== undefined && n.compare(Decimal.of(max)) > 0) return refuse(`${rule} (got ${n.toString()})`);
  return n;
}

export const decimal = (max?: bigint) => field((value) => readDecimal(value, max));

/** An integer that must fit a JS number (counts, sizes, timeouts), at least `min`. */
export const count = (min: number) =>
  field((value) => {
    const n = readInteger(value, { min: BigInt(min), max: BigInt(Number.MAX_SAFE_INTEGER) });
    return n === undefined ? undefined : Number(n);
  });

/** true or false (from the environment: the text `true` or `false`). */
export const flag = () =>
  field((value) => {
    if (value === undefined || typeof value === 'boolean') return value;
    if (value instanceof EnvText && /^(true|false)$/.test(value.text.trim())) return value.text.trim() === 'true';
    return refuse(`must be true or false (got ${describe(value)})`);
  });

/** One of `allowed`, named `name` in the refusal (`unknown provider "x" (expected one of: …)`). */
export function readChoice<T extends string>(value: unknown, name: string, allowed: readonly T[]): T | undefined {
  const chosen = readText(value);
  if (chosen === undefined) return undefined;
  if ((allowed as readonly string[]).includes(chosen)) return chosen as T;
  const shown = value instanceof EnvText ? 'the value from the environment' : JSON.stringify(chosen);
  return refuse(`unknown ${name} ${shown} (expected one of: ${allowed.join(', ')})`);
}

export const choice = <T extends string>(name: string, allowed: readonly T[]) =>
  field((value) => readChoice(value, name, allowed));

/** An absolute http(s) URL without credentials (they would end up in logs); trailing slashes dropped. */
export const httpUrl = () =>
  field((value) => {
    const text = readText(value);
    if (text === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return refuse('must be an absolute http(s) URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return refuse('must be an http(s) URL');
    if (url.username !== '' || url.password !== '') return refuse('must not contain credentials (use api_key)');
    return text.replace(/\/+$/, '');
  });
