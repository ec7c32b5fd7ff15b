import fs from 'node:fs';
import { parseDocument } from 'yaml';
import {
  DEFAULT_BREAKER,
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
import { MODEL_KINDS, MODEL_PROVIDERS, OUTPUT_LIMIT_FIELDS } from './providers';
import { TOOL_NAMES, toolNamed } from '../tools/catalog';
import type { ToolSpec } from '../tools/definitions';
import { configError, describe, readSection, type Section } from './reader';
import { isOwnChatParam } from '../conversation/fields';
import { substituteEnv } from './substitute';
import type {
  BreakerConfig,
  LimitsConfig,
  ModelConfig,
  ModelKind,
  OutputLimitField,
  SvcConfig,
  TokenPrice,
  ToolConfig,
  ToolPrice,
  UpstreamConfig,
  UpstreamProvider,
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
  // Every public name (id or alias) and where it was declared, so a clash names both.
  const names = new Map<string, string>();
  for (const id of section.keys()) {
    if (!MODEL_ID.test(id))
      throw configError(`${section.path}.${id}`, 'a model id is 1-100 letters, digits, ".", "_", ":" or "-"');
    names.set(id, `${section.path}.${id}`);
  }
  for (const id of section.keys()) {
    const entry = section.section(id);
    if (entry === undefined) throw configError(`${section.path}.${id}`, 'must be a mapping');
    const model = readModel(id, entry);
    model.aliases.forEach((alias, i) => {
      const clash = names.get(alias);
      if (clash !== undefined)
        throw configError(`${entry.path}.aliases.${i}`, `'${alias}' is already a model name (${clash})`);
      names.set(alias, `${entry.path}.aliases.${i}`);
    });
    models.set(id, model);
  }
  section.done();
  return models;
}

function modelPrice(section: Section, defaultOutput?: bigint): TokenPrice {
  const base = tokenPrice(section, defaultOutput);
  const cachedInputPer1m = section.integer('cached_input_per_1m', { min: 0n, max: MAX_PRICE });
  const cacheWritePer1m = section.integer('cache_write_per_1m', { min: 0n, max: MAX_PRICE });
  return {
    ...base,
    ...(cachedInputPer1m === undefined ? {} : { cachedInputPer1m }),
    ...(cacheWritePer1m === undefined ? {} : { cacheWritePer1m }),
  };
}

const UPSTREAM_KEYS = [
  'provider',
  'base_url',
  'api_key',
  'upstream_model',
  'max_tokens_field',
  'headers',
  'timeout_ms',
  'extra_params',
  'max_concurrency',
] as const;

function readModel(id: string, entry: Section): ModelConfig {
  const kind = entry.string('kind') === undefined ? 'chat' : oneOf<ModelKind>(entry, 'kind', MODEL_KINDS);
  const dimensions = kind === 'embedding' ? readDimensions(entry) : undefined;
  const priceSection = entry.section('price');
  if (priceSection === undefined)
    throw configError(`${entry.path}.price`, 'is required ({ input_per_1m, output_per_1m } in credits per 1M tokens)');
  // An embedding model produces no output tokens: its output price may be left out.
  const price = modelPrice(priceSection, kind === 'embedding' ? 0n : undefined);
  priceSection.done();
  const contextWindow =
    entry.count('context_window', 1) ??
    (kind === 'embedding' ? DEFAULT_EMBEDDING_INPUT_TOKENS : DEFAULT_CONTEXT_WINDOW);
  const maxOutputTokens = entry.count('max_output_tokens', 1) ?? Math.min(DEFAULT_MAX_OUTPUT_TOKENS, contextWindow);
  if (maxOutputTokens > contextWindow) {
    throw configError(`${entry.path}.max_output_tokens`, `must not exceed context_window (${contextWindow})`);
  }
  const aliases = readAliases(entry, id);
  const breaker = readBreaker(entry);
  let upstreams: UpstreamConfig[];
  const listed = entry.sections('upstreams');
  if (listed !== undefined) {
    // One form or the other: a model-level provider next to a list would be silently ignored.
    for (const key of UPSTREAM_KEYS) {
      if (entry.has(key))
        throw configError(`${entry.path}.${key}`, 'belongs inside each entry of upstreams when upstreams is given');
    }
    if (listed.length === 0) throw configError(`${entry.path}.upstreams`, 'must list at least one upstream');
    upstreams = listed.map((section, i) => readUpstream(id, i, section, true));
  } else {
    upstreams = [readUpstream(id, 0, entry, false)];
  }
  entry.done();
  const first = upstreams[0] as UpstreamConfig;
  const extraParams = new Set<string>();
  for (const upstream of upstreams) for (const name of upstream.extraParams) extraParams.add(name);
  return {
    id,
    aliases,
    upstreams,
    breaker,
    provider: first.provider,
    baseUrl: first.baseUrl,
    apiKey: first.apiKey,
    upstreamModel: first.upstreamModel,
    price,
    contextWindow,
    maxOutputTokens,
    ...(first.maxTokensField === undefined ? {} : { maxTokensField: first.maxTokensField }),
    timeoutMs: first.timeoutMs,
    extraParams,
    ...(kind === 'embedding' ? { kind, ...(dimensions === undefined ? {} : { dimensions }) } : {}),
  };
}

/**
 * One upstream: an entry of `upstreams` (`listed`), or the model entry itself in the
 * single-upstream form (then routing keys such as priority are not read, and `done()` is the
 * model's).
 */
function readUpstream(modelId: string, index: number, entry: Section, listed: boolean): UpstreamConfig {
  const provider = oneOf<UpstreamProvider>(entry, 'provider', MODEL_PROVIDERS);
  const remote = provider !== 'sandbox';
  const baseUrl = httpUrl(entry, 'base_url');
  if (remote && baseUrl === undefined)
    throw configError(`${entry.path}.base_url`, `is required for provider ${provider}`);
  const apiKey = entry.string('api_key');
  const upstreamModel = entry.string('upstream_model');
  if (remote && upstreamModel === undefined)
    throw configError(`${entry.path}.upstream_model`, `is required for provider ${provider}`);
  const timeoutMs = entry.count('timeout_ms', 1) ?? DEFAULT_MODEL_TIMEOUT_MS;
  const maxTokensField =
    entry.string('max_tokens_field') === undefined
      ? undefined
      : oneOf<OutputLimitField>(entry, 'max_tokens_field', OUTPUT_LIMIT_FIELDS);
  const extraParams = readExtraParams(entry);
  const headers = readHeaders(entry);
  const maxConcurrency = entry.count('max_concurrency', 1);
  let priority = 1;
  let weight = 1;
  if (listed) {
    priority = Number(entry.integer('priority', { min: 0n, max: 1_000_000n }) ?? 1n);
    weight = readWeight(entry);
    entry.done();
  }
  const host = baseUrl === undefined ? '' : `@${new URL(baseUrl).host}`;
  return {
    name: `${modelId}#${index + 1}:${provider}${host}`,
    provider,
    baseUrl: baseUrl ?? '',
    apiKey,
    upstreamModel: upstreamModel ?? modelId,
    priority,
    weight,
    ...(maxTokensField === undefined ? {} : { maxTokensField }),
    headers,
    timeoutMs,
    extraParams,
    ...(maxConcurrency === undefined ? {} : { maxConcurrency }),
  };
}

// A weight is a share, so a fraction is as good as an integer; zero or less would never be picked.
function readWeight(entry: Section): number {
  const raw = entry.raw('weight');
  const path = `${entry.path}.weight`;
  if (raw === undefined || raw === null) return 1;
  let value: number | undefined;
  if (typeof raw === 'bigint') value = Number(raw);
  else if (typeof raw === 'number') value = raw;
  else if (typeof raw === 'string' && entry.fromEnv('weight') && /^\s*\d+(\.\d+)?\s*$/.test(raw)) value = Number(raw);
  if (value === undefined || !Number.isFinite(value))
    throw configError(
      path,
      `must be a positive number (got ${entry.fromEnv('weight') ? 'a value from the environment' : describe(raw)})`,
    );
  if (value <= 0 || value > 1_000_000)
    throw configError(path, `must be a positive number up to 1000000 (got ${value})`);
  return value;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
// Set by the provider from the request itself; a configured value would corrupt the exchange.
const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'transfer-encoding', 'connection']);

function readHeaders(entry: Section): Readonly<Record<string, string>> {
  const section = entry.section('headers');
  if (section === undefined) return {};
  const headers: Record<string, string> = {};
  for (const name of section.keys()) {
    const path = `${section.path}.${name}`;
    if (!HEADER_NAME.test(name)) throw configError(path, 'is not a valid HTTP header name');
    if (RESERVED_HEADERS.has(name.toLowerCase()))
      throw configError(path, 'is set by svc itself and cannot be configured');
    const value = section.requiredString(name);
    if (/[\r\n\0]/.test(value)) throw configError(path, 'must not contain line breaks');
    headers[name.toLowerCase()] = value;
  }
  section.done();
  return headers;
}

function readAliases(entry: Section, id: string): string[] {
  const raw = entry.raw('aliases');
  const path = `${entry.path}.aliases`;
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw configError(path, `must be a list of model names (got ${describe(raw)})`);
  const aliases: string[] = [];
  raw.forEach((alias: unknown, i) => {
    if (typeof alias !== 'string' || !MODEL_ID.test(alias))
      throw configError(`${path}.${i}`, `must be 1-100 letters, digits, ".", "_", ":" or "-" (got ${describe(alias)})`);
    if (alias === id) throw configError(`${path}.${i}`, `'${alias}' is the model's own id`);
    if (aliases.includes(alias)) throw configError(`${path}.${i}`, `'${alias}' is listed twice`);
    aliases.push(alias);
  });
  return aliases;
}

function readBreaker(entry: Section): BreakerConfig {
  const section = entry.section('breaker');
  if (section === undefined) return DEFAULT_BREAKER;
  const breaker: BreakerConfig = {
    failures: section.count('failures', 1) ?? DEFAULT_BREAKER.failures,
    openS: section.count('open_s', 1) ?? DEFAULT_BREAKER.openS,
  };
  section.done();
  return breaker;
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
    const tool = toolNamed(name);
    if (tool === undefined) {
      throw configError(`${section.path}.${name}`, `unknown tool (expected one of: ${TOOL_NAMES.join(', ')})`);
    }
    const entry = section.section(name);
    if (entry === undefined) throw configError(`${section.path}.${name}`, 'must be a mapping');
    tools.push(readTool(tool, entry));
  }
  section.done();
  return tools;
}

/** One tool's entry, checked against the providers its tool module accepts. */
function readTool(tool: ToolSpec, entry: Section): ToolConfig {
  const { name } = tool;
  const known = tool.providers;
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
