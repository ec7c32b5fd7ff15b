import Ajv, { type ValidateFunction } from 'ajv';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

/*
 * Validates what svc sends against the official OpenAI OpenAPI document. The document is
 * OpenAPI 3.x: `nullable: true` is rewritten into JSON Schema (`type: [T, "null"]`, or an anyOf
 * with `{type: "null"}`), and OpenAPI-only keywords (discriminator, x-*) are dropped.
 */

// A copy of ../shared/ref/openai/openapi.yaml (openai/openai-openapi f85dbe2, MIT: see the LICENSE
// beside it), kept in the repo so the tests do not depend on where the checkout lives.
const DOC = path.resolve(__dirname, '../fixtures/openai/openapi.yaml');

type Json = Record<string, unknown>;

function rewrite(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rewrite);
  if (typeof node !== 'object' || node === null) return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json)) {
    if (key === 'nullable' || key === 'discriminator' || key.startsWith('x-')) continue;
    out[key] = rewrite(value);
  }
  if ((node as Json)['nullable'] !== true) return out;
  if (typeof out['type'] === 'string') {
    out['type'] = [out['type'], 'null'];
    if (Array.isArray(out['enum'])) out['enum'] = [...(out['enum'] as unknown[]), null];
    return out;
  }
  return { anyOf: [out, { type: 'null' }] };
}

let cache: { ajv: Ajv; schemas: Json; validators: Map<string, ValidateFunction> } | undefined;

function load(): NonNullable<typeof cache> {
  if (cache !== undefined) return cache;
  const doc = YAML.parse(fs.readFileSync(DOC, 'utf8')) as { components: { schemas: Json } };
  const schemas = rewrite(doc.components.schemas) as Json;
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: 'openai', components: { schemas } });
  cache = { ajv, schemas, validators: new Map() };
  return cache;
}

/** Throws, listing the violations, unless `value` matches `components.schemas[name]`. */
export function assertSchema(name: string, value: unknown): void {
  const { ajv, schemas, validators } = load();
  if (!(name in schemas)) throw new Error(`no schema named ${name} in the OpenAPI document`);
  let validate = validators.get(name);
  if (validate === undefined) {
    validate = ajv.compile({ $ref: `openai#/components/schemas/${name}` });
    validators.set(name, validate);
  }
  if (!validate(value)) {
    const errors = (validate.errors ?? [])
      .slice(0, 8)
      .map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
    throw new Error(
      `${name} schema violation:\n  ${errors.join('\n  ')}\nvalue: ${JSON.stringify(value).slice(0, 2000)}`,
    );
  }
}

/** The name of the Response*Event schema for an event type (e.g. "response.created"). */
export function eventSchemaName(type: string): string {
  const { schemas } = load();
  for (const [name, schema] of Object.entries(schemas)) {
    if (!name.endsWith('Event')) continue;
    const props = (schema as Json)['properties'] as Json | undefined;
    const typeProp = props?.['type'] as Json | undefined;
    const values = typeProp?.['enum'];
    if (Array.isArray(values) && values.length === 1 && values[0] === type) return name;
  }
  throw new Error(`no event schema for type ${type}`);
}

/** Validates a Responses stream event against the schema of its type. */
export function assertEvent(event: unknown): void {
  const type = (event as Json)['type'];
  if (typeof type !== 'string') throw new Error(`event without a type: ${JSON.stringify(event)}`);
  assertSchema(eventSchemaName(type), event);
}
