import { invalidArgument } from '../errors';
import type { JsonSchema, ToolDefinitionSpec } from './definitions';

type Args = Record<string, unknown>;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function checkProperty(tool: string, name: string, schema: JsonSchema, value: unknown): void {
  const bad = (expected: string): never => {
    throw invalidArgument(name, `Argument "${name}" of ${tool} must be ${expected}, got ${describe(value)}`);
  };
  const min = typeof schema['minimum'] === 'number' ? schema['minimum'] : undefined;
  const max = typeof schema['maximum'] === 'number' ? schema['maximum'] : undefined;
  const range =
    min !== undefined && max !== undefined
      ? ` between ${min} and ${max}`
      : min !== undefined
        ? ` of at least ${min}`
        : '';
  switch (schema['type']) {
    case 'string': {
      if (typeof value !== 'string') bad('a string');
      const text = value as string;
      const enumValues = schema['enum'];
      if (Array.isArray(enumValues) && !enumValues.includes(text))
        bad(`one of ${enumValues.map((v) => JSON.stringify(v)).join(', ')}`);
      const minLength = typeof schema['minLength'] === 'number' ? schema['minLength'] : 0;
      const maxLength = typeof schema['maxLength'] === 'number' ? schema['maxLength'] : Infinity;
      const length = [...text].length;
      if (length < minLength || length > maxLength || text.trim().length === 0)
        bad(`a non-blank string of ${minLength} to ${maxLength} characters`);
      // A NUL or another control character is never part of a search; upstreams cut or choke on it.
      // eslint-disable-next-line no-control-regex
      if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text))
        throw invalidArgument(name, `Argument "${name}" of ${tool} must not contain control characters (such as NUL)`);
      return;
    }
    case 'integer':
      if (
        typeof value !== 'number' ||
        !Number.isInteger(value) ||
        (min !== undefined && value < min) ||
        (max !== undefined && value > max)
      ) {
        bad(`an integer${range}`);
      }
      return;
    case 'number':
      if (
        typeof value !== 'number' ||
        !Number.isFinite(value) ||
        (min !== undefined && value < min) ||
        (max !== undefined && value > max)
      ) {
        bad(`a number${range}`);
      }
      return;
    default:
      throw new Error(`unsupported schema type for ${tool}.${name}`);
  }
}

/**
 * Checks raw arguments against a tool's input schema (the subset our schemas use), strictly: an
 * unknown, missing or mistyped argument is an `invalid_argument` error naming it. Returns the
 * arguments with schema defaults filled in.
 */
export function validateArguments(tool: ToolDefinitionSpec, raw: unknown): Args {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw invalidArgument('arguments', `The arguments of ${tool.name} must be an object`);
  }
  const properties = tool.inputSchema['properties'] as Record<string, JsonSchema>;
  const required = (tool.inputSchema['required'] as readonly string[] | undefined) ?? [];
  const input = raw as Args;
  for (const name of Object.keys(input)) {
    if (!Object.prototype.hasOwnProperty.call(properties, name)) {
      throw invalidArgument(
        name,
        `Unknown argument "${name}" for ${tool.name}; it accepts: ${Object.keys(properties).join(', ')}`,
      );
    }
  }
  const result: Args = {};
  for (const [name, schema] of Object.entries(properties)) {
    const value = input[name];
    if (value === undefined) {
      if (required.includes(name)) throw invalidArgument(name, `Missing required argument "${name}" for ${tool.name}`);
      if (schema['default'] !== undefined) result[name] = schema['default'];
      continue;
    }
    checkProperty(tool.name, name, schema, value);
    result[name] = value;
  }
  return result;
}
