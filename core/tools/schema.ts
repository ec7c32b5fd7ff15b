import { z } from 'zod';
import { invalidArgument, type SvcError } from '../errors';

/** A JSON Schema object, as sent to clients in `tools/list`. */
export type JsonSchema = { readonly [key: string]: unknown };

// A NUL or another control character is never part of a search; upstreams cut or choke on it.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

/** A search query argument: 1 to `max` characters, not blank, no control characters. */
export function queryArgument(max: number, description: string) {
  return z
    .string()
    .min(1)
    .max(max)
    .refine((text) => !CONTROL.test(text), { message: 'must not contain control characters (such as NUL)' })
    .refine((text) => text.trim().length > 0, { message: `must be a non-blank string of 1 to ${max} characters` })
    .describe(description);
}

/**
 * The JSON Schema clients see for a zod schema. `$schema` is left out: every MCP version takes
 * the 2020-12 dialect as the default, and the older ones declare no such key.
 */
export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'throw' }) as Record<
    string,
    unknown
  >;
  return rest;
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function num(schema: JsonSchema, key: string): number | undefined {
  const value = schema[key];
  // zod bounds every integer by the safe range; that bound says nothing to a model.
  return typeof value === 'number' && Math.abs(value) < Number.MAX_SAFE_INTEGER ? value : undefined;
}

/** What a JSON Schema property accepts, in words ("an integer between 1 and 20"). */
function expected(schema: JsonSchema): string {
  const min = num(schema, 'minimum');
  const max = num(schema, 'maximum');
  const range =
    min !== undefined && max !== undefined
      ? ` between ${min} and ${max}`
      : min !== undefined
        ? ` of at least ${min}`
        : max !== undefined
          ? ` of at most ${max}`
          : '';
  const values = schema['enum'];
  if (Array.isArray(values)) return `one of ${values.map((v) => JSON.stringify(v)).join(', ')}`;
  switch (schema['type']) {
    case 'string':
      return `a non-blank string of ${num(schema, 'minLength') ?? 0} to ${num(schema, 'maxLength') ?? 'any number of'} characters`;
    case 'integer':
      return `an integer${range}`;
    case 'number':
      return `a number${range}`;
    case 'array': {
      const items = (schema['items'] as JsonSchema | undefined) ?? {};
      const most = num(schema, 'maxItems');
      return `a list of ${most !== undefined ? `up to ${most} ` : ''}values, each ${expected(items)}`;
    }
    default:
      return 'a valid value';
  }
}

/** The input schema of a tool: a strict object of named arguments. */
export type ToolInput = z.ZodObject<z.ZodRawShape, z.core.$strict>;

/**
 * Validates raw arguments against a tool's zod schema, strictly: an unknown, missing or mistyped
 * argument throws `invalid_argument` naming it, in words a model can correct from. Returns the
 * arguments with defaults filled in.
 */
export function parseArguments<S extends ToolInput>(tool: string, schema: S, raw: unknown): z.output<S> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw invalidArgument('arguments', `The arguments of ${tool} must be an object`);
  }
  const accepted = Object.keys(schema.shape);
  // Own keys, `__proto__` included (JSON.parse makes it an ordinary key).
  for (const name of Object.keys(raw)) {
    if (!accepted.includes(name))
      throw invalidArgument(name, `Unknown argument "${name}" for ${tool}; it accepts: ${accepted.join(', ')}`);
  }
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  throw issueError(tool, schema, raw as Record<string, unknown>, result.error.issues[0]);
}

function issueError(
  tool: string,
  schema: ToolInput,
  raw: Record<string, unknown>,
  issue: z.core.$ZodIssue | undefined,
): SvcError {
  const name = typeof issue?.path[0] === 'string' ? issue.path[0] : 'arguments';
  const value = raw[name];
  if (issue === undefined || name === 'arguments')
    return invalidArgument('arguments', `The arguments of ${tool} are invalid: ${issue?.message ?? 'unknown error'}`);
  if (value === undefined) return invalidArgument(name, `Missing required argument "${name}" for ${tool}`);
  // Refinements and patterns carry svc's own wording ("must not contain control characters").
  if (issue.code === 'custom' || issue.code === 'invalid_format')
    return invalidArgument(name, `Argument "${name}" of ${tool} ${issue.message}`);
  const property = ((toJsonSchema(schema, 'input')['properties'] as Record<string, JsonSchema>)[name] ??
    {}) as JsonSchema;
  const at =
    issue.path.length > 1
      ? ` (item ${String(issue.path[1])}: ${describeValue((value as unknown[])[Number(issue.path[1])])})`
      : '';
  return invalidArgument(
    name,
    `Argument "${name}" of ${tool} must be ${expected(property)}, got ${describeValue(value)}${at}`,
  );
}

// Arabic yeh, alef maksura and kaf, as Arabic keyboard layouts type them: Iranian maps and shops
// index the Persian ی and ک, so the Arabic letters miss most matches. web_search keeps the query
// as typed: the web holds Arabic text too, where the Arabic letters are right.
const ARABIC_TO_PERSIAN: Readonly<Record<string, string>> = { ي: 'ی', ى: 'ی', ك: 'ک' };

/** Trims a query and writes Arabic yeh/kaf as the Persian letters every Iranian source uses. */
export function normalizeQuery(query: string): string {
  return query.trim().replace(/[يىك]/g, (c) => ARABIC_TO_PERSIAN[c] ?? c);
}
