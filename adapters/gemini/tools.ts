import type { ChatCompletionParams, Tool } from '../../gen/svc/core/v1/chat';
import { invalidArgument } from '../../core/edge';
import { bad, camel, get, isObj, present, str, unknownFields, unsupported, type Obj } from './fields';

/* Gemini's tools and toolConfig → the core's function tools and tool choice. */

/** Google's `Schema` (OpenAPI 3.0 subset, upper-case types) as JSON Schema. */
export function jsonSchemaOf(schema: unknown, at: string): Obj {
  if (!isObj(schema)) return bad(at, 'expected a Schema object.');
  const out: Obj = {};
  for (const [rawKey, value] of Object.entries(schema)) {
    const key = camel(rawKey);
    switch (key) {
      case 'type':
        out['type'] = str(value, `${at}.type`).toLowerCase();
        break;
      case 'nullable':
        break;
      case 'properties': {
        if (!isObj(value)) return bad(`${at}.properties`, 'expected an object.');
        const props: Obj = {};
        for (const [name, sub] of Object.entries(value)) props[name] = jsonSchemaOf(sub, `${at}.properties.${name}`);
        out['properties'] = props;
        break;
      }
      case 'items':
        out['items'] = jsonSchemaOf(value, `${at}.items`);
        break;
      case 'anyOf':
        if (!Array.isArray(value)) return bad(`${at}.anyOf`, 'expected a list.');
        out['anyOf'] = value.map((s, i) => jsonSchemaOf(s, `${at}.anyOf[${i}]`));
        break;
      case 'propertyOrdering':
      case 'example':
        break;
      case 'minItems':
      case 'maxItems':
      case 'minLength':
      case 'maxLength':
      case 'minProperties':
      case 'maxProperties':
        // int64 fields arrive as strings in proto JSON.
        out[key] = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
        break;
      default:
        out[key] = value;
    }
  }
  if (schema['nullable'] === true && typeof out['type'] === 'string') out['type'] = [out['type'], 'null'];
  return out;
}

const DECLARATION_FIELDS = new Set([
  'name',
  'description',
  'parameters',
  'parametersJsonSchema',
  'response',
  'responseJsonSchema',
  'behavior',
]);

/** The function declarations of `tools`, and whether it asks for Google Search. */
export function declarations(tools: unknown): { functions: Tool[]; googleSearch: boolean } {
  if (!present(tools)) return { functions: [], googleSearch: false };
  if (!Array.isArray(tools)) return bad('tools', 'expected a list.');
  const functions: Tool[] = [];
  let googleSearch = false;
  tools.forEach((t, i) => {
    const at = `tools[${i}]`;
    if (!isObj(t)) return bad(at, 'expected an object.');
    for (const rawKey of Object.keys(t)) {
      const key = camel(rawKey);
      const value = t[rawKey];
      if (key === 'googleSearch' || key === 'googleSearchRetrieval') {
        googleSearch = true;
        continue;
      }
      if (key !== 'functionDeclarations')
        unsupported(`${at}.${key}`, 'only functionDeclarations and googleSearch tools are served.');
      if (!Array.isArray(value)) return bad(`${at}.functionDeclarations`, 'expected a list.');
      value.forEach((d, j) => {
        const f = `${at}.functionDeclarations[${j}]`;
        if (!isObj(d)) return bad(f, 'expected an object.');
        unknownFields(d, DECLARATION_FIELDS, f);
        const name = str(get(d, 'name'), `${f}.name`);
        const description = get(d, 'description');
        const jsonSchema = get(d, 'parametersJsonSchema');
        const schema = get(d, 'parameters');
        if (present(jsonSchema) && present(schema))
          bad(f, "set either 'parameters' or 'parametersJsonSchema', not both.");
        let parameters: Obj;
        if (present(jsonSchema))
          parameters = isObj(jsonSchema) ? jsonSchema : bad(`${f}.parametersJsonSchema`, 'expected an object.');
        else if (present(schema)) parameters = jsonSchemaOf(schema, `${f}.parameters`);
        else parameters = { type: 'object', properties: {} };
        functions.push({
          type: 'function',
          function: {
            name,
            description: present(description) ? str(description, `${f}.description`) : '',
            parameters,
          },
        });
        return undefined;
      });
    }
    return undefined;
  });
  return { functions, googleSearch };
}

/** `toolConfig.functionCallingConfig` as the tool choice (and the tools offered). */
export function toolConfig(raw: unknown, params: ChatCompletionParams): void {
  if (!present(raw)) return;
  if (!isObj(raw)) return bad('toolConfig', 'expected an object.');
  unknownFields(raw, new Set(['functionCallingConfig', 'retrievalConfig']), 'toolConfig');
  if (present(get(raw, 'retrievalConfig')))
    unsupported('toolConfig.retrievalConfig', 'retrieval locations are not served.');
  const fc = get(raw, 'functionCallingConfig');
  if (!present(fc)) return;
  const at = 'toolConfig.functionCallingConfig';
  if (!isObj(fc)) return bad(at, 'expected an object.');
  unknownFields(fc, new Set(['mode', 'allowedFunctionNames']), at);
  const mode = get(fc, 'mode') ?? 'AUTO';
  const allowedRaw = get(fc, 'allowedFunctionNames');
  let allowed: string[] = [];
  if (present(allowedRaw)) {
    if (!Array.isArray(allowedRaw)) return bad(`${at}.allowedFunctionNames`, 'expected a list.');
    allowed = allowedRaw.map((n, i) => str(n, `${at}.allowedFunctionNames[${i}]`));
  }
  const names = new Set(params.tools.map((t) => t.function?.name ?? ''));
  for (const [i, name] of allowed.entries())
    if (!names.has(name))
      throw invalidArgument(
        `${at}.allowedFunctionNames[${i}]`,
        `Invalid value at '${at}.allowedFunctionNames[${i}]': no function '${name}' is declared in tools.`,
      );
  switch (mode) {
    case 'AUTO':
    case 'VALIDATED':
    case 'MODE_UNSPECIFIED':
      params.toolChoice = { choice: { $case: 'mode', value: 'auto' } };
      break;
    case 'NONE':
      params.toolChoice = { choice: { $case: 'mode', value: 'none' } };
      return;
    case 'ANY':
      params.toolChoice =
        allowed.length === 1 && allowed[0] !== undefined
          ? { choice: { $case: 'functionName', value: allowed[0] } }
          : { choice: { $case: 'mode', value: 'required' } };
      break;
    default:
      throw invalidArgument(
        `${at}.mode`,
        `Invalid value at '${at}.mode': expected AUTO, ANY, NONE or VALIDATED, got '${String(mode)}'.`,
      );
  }
  // The model may call only these: the others are not offered to it.
  if (allowed.length > 0) params.tools = params.tools.filter((t) => allowed.includes(t.function?.name ?? ''));
}
