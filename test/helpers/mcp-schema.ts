import Ajv, { type ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The protocol versions whose official schema is kept in test/mcp (copies of ../shared/ref/mcp/). */
export type SchemaVersion = '2025-06-18' | '2025-11-25' | '2026-07-28';

// 2025-06-18 is draft-07 with `definitions`; the later ones are draft 2020-12 with `$defs`.
const validators = new Map<SchemaVersion, { ajv: Ajv; id: string; defs: string }>();

function schemaFor(version: SchemaVersion): { ajv: Ajv; id: string; defs: string } {
  let entry = validators.get(version);
  if (entry === undefined) {
    const draft07 = version === '2025-06-18';
    const ajv = draft07 ? new Ajv({ strict: false, allErrors: true }) : new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    const id = `https://modelcontextprotocol.io/schema/${version}.json`;
    const schema = JSON.parse(readFileSync(path.join(__dirname, `../mcp/schema-${version}.json`), 'utf8')) as object;
    ajv.addSchema({ ...schema, $id: id });
    entry = { ajv, id, defs: draft07 ? 'definitions' : '$defs' };
    validators.set(version, entry);
  }
  return entry;
}

const cache = new Map<string, ValidateFunction>();

/** Throws (with ajv's reasons) unless `value` validates against that version's `<definition>`. */
export function assertMcp(definition: string, value: unknown, version: SchemaVersion = '2025-06-18'): void {
  const { ajv, id, defs } = schemaFor(version);
  const cacheKey = `${version}#${definition}`;
  let validate = cache.get(cacheKey);
  if (validate === undefined) {
    validate = ajv.compile({ $ref: `${id}#/${defs}/${definition}` });
    cache.set(cacheKey, validate);
  }
  if (!validate(value)) {
    throw new Error(
      `not a valid MCP ${version} ${definition}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`,
    );
  }
}

/**
 * Validates a whole JSON-RPC response: the envelope (JSONRPCResponse or JSONRPCError) and, for a
 * result, the result against `resultDefinition` (e.g. CallToolResult), in the given version's schema.
 */
export function assertMcpResponse(
  message: unknown,
  resultDefinition: string,
  version: SchemaVersion = '2025-06-18',
): void {
  const m = message as { result?: unknown; error?: unknown; id?: unknown };
  const errorEnvelope = version === '2025-06-18' ? 'JSONRPCError' : 'JSONRPCErrorResponse';
  const resultEnvelope = version === '2025-06-18' ? 'JSONRPCResponse' : 'JSONRPCResultResponse';
  if (m.error !== undefined) {
    // JSON-RPC answers a message whose id it could not read with `id: null`, which the MCP schema
    // (ids are string | number) does not model; the error object itself is still checked.
    if (m.id === null) assertMcp(errorEnvelope, { ...m, id: 0 }, version);
    else assertMcp(errorEnvelope, m, version);
    return;
  }
  assertMcp(resultEnvelope, m, version);
  assertMcp(resultDefinition, m.result, version);
}
