import fs from 'node:fs';
import { parseDocument } from 'yaml';
import {
  DEFAULT_CONTEXT_WINDOW,
  DEFAULT_EMBEDDING_INPUT_TOKENS,
  DEFAULT_LIMITS,
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_MODEL_TIMEOUT_MS,
  DEFAULT_TOOL_TIMEOUT_MS,
  builtInModels,
  builtInTools,
  defaultToolCap,
} from './defaults';
import {
  MODEL_KINDS,
  MODEL_PROVIDERS,
  OUTPUT_LIMIT_FIELDS,
  TOOL_NAMES,
  TOOL_PROVIDERS,
  type ModelProvider,
  type ToolName,
} from './providers';
import { configError, describe, readSection, type Section } from './reader';
import { isOwnChatParam } from '../conversation/fields';
import { substituteEnv } from './substitute';
import type {
  LimitsConfig,
  ModelConfig,
  ModelKind,
  OutputLimitField,
  SvcConfig,
  TokenPrice,
  ToolConfig,
  ToolPrice,
} from './types';

// Money and counts stay far below 2^53 so that they print as exact JSON numbers.
const MAX_PRICE = BigInt(Number.MAX_SAFE_INTEGER);
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * Loads and validates the configuration file of SPEC §4, or returns the built-in sandbox
 * configuration when `path` is undefined.
 *
 * - `${NAME}` in any string value is replaced by `env.NAME`; an unset variable is an error.
 * - Every error is an `Error` whose message starts with `config <key path>:`.
 * - A top-level section that is absent keeps its built-in default. `models`, when present, is
 *   the complete list of models. `tools` entries replace the built-in sandbox tool of the same
 *   name, so one real provider is one entry away and the other tools keep working.
 */
export function loadConfig(path: string | undefined, env: NodeJS.ProcessEnv): SvcConfig {
  if (path === undefined) {
    return { models: builtInModels(), tools: builtInTools(), limits: DEFAULT_LIMITS, source: 'built-in' };
  }
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new Error(`config file ${path}: cannot be read${typeof code === 'string' ? ` (${code})` : ''}`, {
      cause: error,
    });
  }
  return parseConfig(text, env, path);
}

/** Validates configuration text (YAML); `source` names it in the result and in syntax errors. */
export function parseConfig(text: string, env: NodeJS.ProcessEnv, source: string): SvcConfig {
  const doc = parseDocument(text, { intAsBigInt: true, prettyErrors: true });
  const syntax = doc.errors[0];
  if (syntax !== undefined) {
    const where = syntax.linePos?.[0];
    const at = where === undefined ? '' : ` at line ${where.line}, column ${where.col}`;
    throw new Error(`config file ${source}: invalid YAML${at}: ${syntax.message.split('\n', 1)[0] ?? ''}`);
  }
  const parsed: unknown = doc.toJS({ maxAliasCount: 100 });
  if (parsed === null || parsed === undefined) {
    return { models: builtInModels(), tools: builtInTools(), limits: DEFAULT_LIMITS, source };
  }
  const { value, fromEnv } = substituteEnv(parsed, env);
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(
      `config file ${source}: the top level must be a mapping with models, tools and limits (got ${describe(value)})`,
    );
  }
  const root = readSection(value, '', fromEnv);
  const modelsSection = root.section('models');
  const toolsSection = root.section('tools');
  const limitsSection = root.section('limits');
  root.done();

  const models = modelsSection === undefined ? builtInModels() : readModels(modelsSection);
  const tools = builtInTools();
  if (toolsSection !== undefined) for (const tool of readTools(toolsSection)) tools.set(tool.name, tool);
  const limits = limitsSection === undefined ? DEFAULT_LIMITS : readLimits(limitsSection);
  return { models, tools, limits, source };
}

function oneOf<T extends string>(section: Section, key: string, allowed: readonly T[]): T {
  const value = section.requiredString(key);
  if ((allowed as readonly string[]).includes(value)) return value as T;
  const shown = section.fromEnv(key) ? 'the value from the environment' : JSON.stringify(value);
  throw configError(`${section.path}.${key}`, `unknown ${key} ${shown} (expected one of: ${allowed.join(', ')})`);
}

function httpUrl(section: Section, key: string): string | undefined {
  const value = section.string(key);
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw configError(`${section.path}.${key}`, 'must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw configError(`${section.path}.${key}`, 'must be an http(s) URL');
  // Credentials in a URL end up in logs and spans; they belong in api_key.
  if (url.username !== '' || url.password !== '')
    throw configError(`${section.path}.${key}`, 'must not contain credentials (use api_key)');
  return value.replace(/\/+$/, '');
}

function tokenPrice(section: Section, defaultOutput?: bigint): TokenPrice {
  const inputPer1m = section.integer('input_per_1m', { min: 0n, max: MAX_PRICE });
  const outputPer1m = section.integer('output_per_1m', { min: 0n, max: MAX_PRICE }) ?? defaultOutput;
  if (inputPer1m === undefined) throw configError(`${section.path}.input_per_1m`, 'is required');
  if (outputPer1m === undefined) throw configError(`${section.path}.output_per_1m`, 'is required');
  return { inputPer1m, outputPer1m };
}

function readModels(section: Section): Map<string, ModelConfig> {
  const models = new Map<string, ModelConfig>();
  for (const id of section.keys()) {
    if (!MODEL_ID.test(id))
      throw configError(`${section.path}.${id}`, 'a model id is 1-100 letters, digits, ".", "_", ":" or "-"');
    const entry = section.section(id);
    if (entry === undefined) throw configError(`${section.path}.${id}`, 'must be a mapping');
    models.set(id, readModel(id, entry));
  }
  section.done();
  return models;
}

function readModel(id: string, entry: Section): ModelConfig {
  const provider = oneOf<ModelProvider>(entry, 'provider', MODEL_PROVIDERS);
  const kind = entry.string('kind') === undefined ? 'chat' : oneOf<ModelKind>(entry, 'kind', MODEL_KINDS);
  const dimensions = kind === 'embedding' ? readDimensions(entry) : undefined;
  const upstream = provider !== 'sandbox';
  const baseUrl = httpUrl(entry, 'base_url');
  if (upstream && baseUrl === undefined)
    throw configError(`${entry.path}.base_url`, `is required for provider ${provider}`);
  const apiKey = entry.string('api_key');
  const upstreamModel = entry.string('upstream_model');
  if (upstream && upstreamModel === undefined)
    throw configError(`${entry.path}.upstream_model`, `is required for provider ${provider}`);
  const priceSection = entry.section('price');
  if (priceSection === undefined)
    throw configError(`${entry.path}.price`, 'is required ({ input_per_1m, output_per_1m } in credits per 1M tokens)');
  // An embedding model produces no output tokens: its output price may be left out.
  const price = tokenPrice(priceSection, kind === 'embedding' ? 0n : undefined);
  priceSection.done();
  const contextWindow =
    entry.count('context_window', 1) ??
    (kind === 'embedding' ? DEFAULT_EMBEDDING_INPUT_TOKENS : DEFAULT_CONTEXT_WINDOW);
  const maxOutputTokens = entry.count('max_output_tokens', 1) ?? Math.min(DEFAULT_MAX_OUTPUT_TOKENS, contextWindow);
  if (maxOutputTokens > contextWindow) {
    throw configError(`${entry.path}.max_output_tokens`, `must not exceed context_window (${contextWindow})`);
  }
  const timeoutMs = entry.count('timeout_ms', 1) ?? DEFAULT_MODEL_TIMEOUT_MS;
  const maxTokensField =
    entry.string('max_tokens_field') === undefined
      ? undefined
      : oneOf<OutputLimitField>(entry, 'max_tokens_field', OUTPUT_LIMIT_FIELDS);
  const extraParams = readExtraParams(entry);
  entry.done();
  return {
    id,
    provider,
    baseUrl: baseUrl ?? '',
    apiKey,
    upstreamModel: upstreamModel ?? id,
    price,
    contextWindow,
    maxOutputTokens,
    ...(maxTokensField === undefined ? {} : { maxTokensField }),
    timeoutMs,
    extraParams,
    ...(kind === 'embedding' ? { kind, ...(dimensions === undefined ? {} : { dimensions }) } : {}),
  };
}

// `dimensions: 1536` or `dimensions: [3072, 1536, 768]` (the first is the default).
function readDimensions(entry: Section): readonly number[] | undefined {
  const raw = entry.raw('dimensions');
  const path = `${entry.path}.dimensions`;
  if (raw === undefined || raw === null) return undefined;
  const list: unknown[] = Array.isArray(raw) ? raw : [raw];
  if (list.length === 0) throw configError(path, 'must name at least one vector length');
  return list.map((value, i) => {
    const n = typeof value === 'bigint' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 65_536)
      throw configError(
        Array.isArray(raw) ? `${path}[${i}]` : path,
        `must be an integer from 1 to 65536 (got ${describe(value)})`,
      );
    return n;
  });
}

// Parameters an upstream takes beyond OpenAI's (e.g. vLLM's top_k, min_p): without this list
// they are refused, as OpenAI refuses them.
function readExtraParams(entry: Section): ReadonlySet<string> {
  const raw = entry.raw('extra_params');
  const path = `${entry.path}.extra_params`;
  if (raw === undefined || raw === null) return new Set();
  if (!Array.isArray(raw)) throw configError(path, `must be a list of parameter names (got ${describe(raw)})`);
  const names = new Set<string>();
  raw.forEach((name: unknown, i) => {
    if (typeof name !== 'string' || !PARAM_NAME.test(name))
      throw configError(`${path}[${i}]`, `must be a parameter name of letters, digits and "_" (got ${describe(name)})`);
    if (isOwnChatParam(name))
      throw configError(`${path}[${i}]`, `'${name}' is an OpenAI chat parameter already: list only others`);
    names.add(name);
  });
  return names;
}

function readTools(section: Section): ToolConfig[] {
  const tools: ToolConfig[] = [];
  for (const name of section.keys()) {
    if (!(TOOL_NAMES as readonly string[]).includes(name)) {
      throw configError(`${section.path}.${name}`, `unknown tool (expected one of: ${TOOL_NAMES.join(', ')})`);
    }
    const entry = section.section(name);
    if (entry === undefined) throw configError(`${section.path}.${name}`, 'must be a mapping');
    tools.push(readTool(name as ToolName, entry));
  }
  section.done();
  return tools;
}

function readTool(name: ToolName, entry: Section): ToolConfig {
  const known = TOOL_PROVIDERS[name];
  const provider = oneOf(entry, 'provider', Object.keys(known));
  const spec = known[provider];
  if (spec === undefined) throw configError(`${entry.path}.provider`, 'is not a known provider');
  const baseUrl = httpUrl(entry, 'base_url') ?? spec.defaultBaseUrl;
  if (baseUrl === undefined)
    throw configError(`${entry.path}.base_url`, `is required for provider ${provider} (it is self-hosted)`);
  const apiKey = entry.string('api_key');
  if (spec.needsApiKey && apiKey === undefined)
    throw configError(`${entry.path}.api_key`, `is required for provider ${provider}`);
  let model = entry.string('model');
  if (model !== undefined && spec.defaultModel === undefined)
    throw configError(`${entry.path}.model`, `is not used by provider ${provider}`);
  model ??= spec.defaultModel;
  const price = toolPrice(entry);
  const timeoutMs = entry.count('timeout_ms', 1) ?? DEFAULT_TOOL_TIMEOUT_MS;
  entry.done();
  return { name, provider, baseUrl, apiKey, model, price, timeoutMs };
}

function toolPrice(entry: Section): ToolPrice {
  const raw = entry.raw('price');
  const path = `${entry.path}.price`;
  if (raw === undefined || raw === null)
    throw configError(path, 'is required (flat credits per call, or { input_per_1m, output_per_1m, cap })');
  if (typeof raw === 'object' && !Array.isArray(raw)) {
    const section = entry.section('price');
    if (section === undefined) throw configError(path, 'must be a mapping');
    const tariff = tokenPrice(section);
    const cap =
      section.integer('cap', { min: 1n, max: MAX_PRICE }) ?? defaultToolCap(tariff.inputPer1m, tariff.outputPer1m);
    section.done();
    return { kind: 'tokens', tariff, cap };
  }
  const credits = entry.integer('price', { min: 0n, max: MAX_PRICE });
  if (credits === undefined) throw configError(path, 'is required');
  return { kind: 'flat', credits };
}

function readLimits(section: Section): LimitsConfig {
  const limits: LimitsConfig = {
    requestsPerMinute: section.count('requests_per_minute', 1) ?? DEFAULT_LIMITS.requestsPerMinute,
    maxBodyBytes: section.count('max_body_bytes', 1024) ?? DEFAULT_LIMITS.maxBodyBytes,
    holdTtlSeconds: section.count('hold_ttl_seconds', 1) ?? DEFAULT_LIMITS.holdTtlSeconds,
    streamStallSeconds: section.count('stream_stall_seconds', 1) ?? DEFAULT_LIMITS.streamStallSeconds,
  };
  const tokensPerMinute = section.count('tokens_per_minute', 1);
  const redisFailure = section.string('redis_failure');
  section.done();
  if (redisFailure !== undefined && redisFailure !== 'open' && redisFailure !== 'closed')
    throw configError(`${section.path}.redis_failure`, `must be open or closed (got ${JSON.stringify(redisFailure)})`);
  return {
    ...limits,
    ...(tokensPerMinute === undefined ? {} : { tokensPerMinute }),
    ...(redisFailure === undefined ? {} : { redisFailure }),
  };
}
