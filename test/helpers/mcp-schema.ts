import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import path from 'node:path';

// A copy of ../shared/ref/mcp/schema-2025-06-18.json (the official schema of protocol 2025-06-18),
// kept in the repo so CI has it.
const SCHEMA_PATH = path.join(__dirname, '../mcp/schema-2025-06-18.json');
const SCHEMA_ID = 'https://modelcontextprotocol.io/schema/2025-06-18.json';

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...(JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as object), $id: SCHEMA_ID });

const cache = new Map<string, ValidateFunction>();

/** Throws (with ajv's reasons) unless `value` validates against `#/definitions/<definition>`. */
export function assertMcp(definition: string, value: unknown): void {
  let validate = cache.get(definition);
  if (validate === undefined) {
    validate = ajv.compile({ $ref: `${SCHEMA_ID}#/definitions/${definition}` });
    cache.set(definition, validate);
  }
  if (!validate(value)) {
    throw new Error(
      `not a valid MCP ${definition}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`,
    );
  }
}

/**
 * Validates a whole JSON-RPC response: the envelope (JSONRPCResponse or JSONRPCError) and, for a
 * result, the result against `resultDefinition` (e.g. CallToolResult).
 */
export function assertMcpResponse(message: unknown, resultDefinition: string): void {
  const m = message as { result?: unknown; error?: unknown; id?: unknown };
  if (m.error !== undefined) {
    // JSON-RPC answers a message whose id it could not read with `id: null`, which the MCP schema
    // (ids are string | number) does not model; the error object itself is still checked.
    if (m.id === null) assertMcp('JSONRPCError', { ...m, id: 0 });
    else assertMcp('JSONRPCError', m);
    return;
  }
  assertMcp('JSONRPCResponse', m);
  assertMcp(resultDefinition, m.result);
}
