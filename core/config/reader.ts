import { childPath, isPlainObject } from './substitute';

/** Throws the one error shape of a bad configuration: `config <key path>: <what is wrong>`. */
export function configError(path: string, message: string): Error {
  return new Error(`config ${path}: ${message}`);
}

/**
 * A typed, path-aware view of one mapping in the configuration file. Every read names the key
 * path in its error, and `done()` rejects keys nobody read, so a typo is never ignored.
 */
export interface Section {
  readonly path: string;
  has(key: string): boolean;
  string(key: string): string | undefined;
  requiredString(key: string): string;
  integer(key: string, range?: { min?: bigint; max?: bigint }): bigint | undefined;
  /** An integer that must fit a JS number (counts, sizes, timeouts), at least `min`. */
  count(key: string, min: number): number | undefined;
  section(key: string): Section | undefined;
  /** A list of mappings (e.g. `upstreams`), each a Section named `key.i`; absent: undefined. */
  sections(key: string): Section[] | undefined;
  /** The raw value, for fields with more than one accepted shape. */
  raw(key: string): unknown;
  /** Whether the key's value came from `${NAME}` substitution (then errors must not echo it). */
  fromEnv(key: string): boolean;
  /** The mapping's keys, for sections keyed by name (models, tools). */
  keys(): string[];
  /** Throws on any key that was not read. */
  done(): void;
}

export function readSection(value: unknown, path: string, fromEnv: ReadonlySet<string>): Section {
  if (!isPlainObject(value)) throw configError(path, `must be a mapping (got ${describe(value)})`);
  const obj = value;
  const seen = new Set<string>();
  const at = (key: string): string => childPath(path, key);

  function get(key: string): unknown {
    seen.add(key);
    return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
  }

  function integerAt(v: unknown, p: string, range: { min?: bigint; max?: bigint }): bigint {
    let n: bigint;
    if (typeof v === 'bigint') n = v;
    // A value substituted from the environment is text; accept it only if it is exactly an integer.
    else if (typeof v === 'string' && fromEnv.has(p) && /^-?\d+$/.test(v.trim())) n = BigInt(v.trim());
    else
      throw configError(
        p,
        `${rangeText(range)} (got ${fromEnv.has(p) ? 'a value from the environment' : describe(v)})`,
      );
    if (range.min !== undefined && n < range.min) throw configError(p, `${rangeText(range)} (got ${n})`);
    if (range.max !== undefined && n > range.max) throw configError(p, `must be at most ${range.max} (got ${n})`);
    return n;
  }

  const section: Section = {
    path,
    has: (key) => Object.prototype.hasOwnProperty.call(obj, key) && obj[key] !== null,
    string(key) {
      const v = get(key);
      if (v === undefined || v === null) return undefined;
      if (typeof v !== 'string') throw configError(at(key), `must be a string (got ${describe(v)})`);
      if (v.trim() === '')
        throw configError(
          at(key),
          fromEnv.has(at(key)) ? 'is empty (check the environment variable it names)' : 'must not be empty',
        );
      return v;
    },
    requiredString(key) {
      const v = section.string(key);
      if (v === undefined) throw configError(at(key), 'is required');
      return v;
    },
    integer(key, range = {}) {
      const v = get(key);
      if (v === undefined || v === null) return undefined;
      return integerAt(v, at(key), range);
    },
    count(key, min) {
      const v = section.integer(key, { min: BigInt(min), max: BigInt(Number.MAX_SAFE_INTEGER) });
      return v === undefined ? undefined : Number(v);
    },
    section(key) {
      const v = get(key);
      if (v === undefined || v === null) return undefined;
      return readSection(v, at(key), fromEnv);
    },
    sections(key) {
      const v = get(key);
      if (v === undefined || v === null) return undefined;
      if (!Array.isArray(v)) throw configError(at(key), `must be a list of mappings (got ${describe(v)})`);
      return v.map((item: unknown, i) => readSection(item, childPath(at(key), i), fromEnv));
    },
    raw: get,
    fromEnv: (key) => fromEnv.has(at(key)),
    keys: () => Object.keys(obj),
    done() {
      const unknown = Object.keys(obj).filter((k) => !seen.has(k));
      const first = unknown[0];
      if (first !== undefined) {
        const expected = [...seen].sort().join(', ');
        throw configError(at(first), `unknown key${expected === '' ? '' : ` (expected one of: ${expected})`}`);
      }
    },
  };
  return section;
}

// Limits above 2^53 exist only to keep values exact; the message states the lower bound.
function rangeText(range: { min?: bigint }): string {
  if (range.min === 0n) return 'must be a non-negative integer';
  if (range.min === 1n) return 'must be a positive integer';
  if (range.min !== undefined) return `must be an integer of at least ${range.min}`;
  return 'must be an integer';
}

export function describe(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : `the fraction ${value}`;
  if (typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}
