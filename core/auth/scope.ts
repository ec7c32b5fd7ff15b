import { invalidArgument, SvcError } from '../errors';

/** What a key may call: `chat` the OpenAI API (chat, Responses, models), `tools` the MCP tools, `all` both. */
export type KeyScope = 'all' | 'chat' | 'tools';

/** The part of the service a call belongs to; a key's scope must cover it. */
export type ApiSurface = 'chat' | 'tools';

export const KEY_SCOPES: readonly KeyScope[] = ['all', 'chat', 'tools'];

/** Longest grace a rolled key's predecessor may keep working. */
export const MAX_ROLL_GRACE_MS = 30 * 24 * 3600 * 1000;
export const DEFAULT_ROLL_GRACE_MS = 24 * 3600 * 1000;

/** An empty or absent scope is `all`; anything else unknown is refused naming `param`. */
export function parseScope(value: string | undefined, param = 'scope'): KeyScope {
  if (value === undefined || value === '') return 'all';
  if ((KEY_SCOPES as readonly string[]).includes(value)) return value as KeyScope;
  throw invalidArgument(
    param,
    `${param} must be one of ${KEY_SCOPES.join(', ')}, optionally followed by ",manage" (got ${JSON.stringify(value)})`,
  );
}

/** What a key is granted: the API surface it may call, and whether it may manage the account's keys. */
export interface KeyGrant {
  readonly scope: KeyScope;
  /**
   * The `manage` scope: list, revoke, roll and cap the account's other keys over the API. Never
   * granted unless asked for: a key leaked from an app must not be able to lock its owner out.
   */
  readonly manage: boolean;
}

/**
 * A scope as `svc key create --scope` and CreateKey take it: one of `all`, `chat`, `tools`,
 * optionally with `,manage` (`chat,manage`); `manage` alone is `all,manage`. Empty is `all`.
 */
export function parseKeyGrant(value: string | undefined, param = 'scope'): KeyGrant {
  const parts = (value ?? '').split(',').map((p) => p.trim());
  const manage = parts.filter((p) => p === 'manage').length;
  const surfaces = parts.filter((p) => p !== 'manage' && p !== '');
  if (manage > 1 || surfaces.length > 1 || (value !== undefined && value.trim() !== '' && parts.includes(''))) {
    throw invalidArgument(
      param,
      `${param} must be one of ${KEY_SCOPES.join(', ')}, optionally followed by ",manage" (got ${JSON.stringify(value)})`,
    );
  }
  return { scope: parseScope(surfaces[0], param), manage: manage === 1 };
}

/** The scope as shown and as `parseKeyGrant` reads it back: `chat`, `all,manage`… */
export function formatKeyGrant(grant: KeyGrant): string {
  return grant.manage ? `${grant.scope},manage` : grant.scope;
}

export function scopeCovers(scope: KeyScope, surface: ApiSurface): boolean {
  return scope === 'all' || scope === surface;
}

/**
 * A grace period: `0`, or a whole number followed by `s`, `m`, `h` or `d` (`90m`, `24h`, `7d`),
 * at most 30 days.
 */
export function parseGrace(text: string, param = 'grace'): number {
  const trimmed = text.trim();
  if (trimmed === '0') return 0;
  const match = /^(\d{1,9})([smhd])$/.exec(trimmed);
  if (match === null) {
    throw invalidArgument(
      param,
      `${param} must be 0 or a whole number of s, m, h or d, e.g. 24h or 7d (got ${JSON.stringify(text)})`,
    );
  }
  const factor = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'];
  return checkGrace(Number(match[1]) * factor, param);
}

export function checkGrace(ms: number, param = 'grace'): number {
  if (!Number.isSafeInteger(ms) || ms < 0) throw invalidArgument(param, `${param} must be a duration of 0 or more`);
  if (ms > MAX_ROLL_GRACE_MS) throw invalidArgument(param, `${param} must be at most 30 days (30d)`);
  return ms;
}

/** An ISO-8601 date-time with an explicit zone (`2026-12-31T23:59:59Z`, `…+03:30`) or a date (`2026-12-31`, midnight UTC). */
export function parseExpiry(text: string, param = 'expires'): number {
  const trimmed = text.trim();
  const iso = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/;
  const ms = iso.test(trimmed) ? Date.parse(trimmed) : NaN;
  if (Number.isNaN(ms)) {
    throw invalidArgument(
      param,
      `${param} must be an ISO-8601 date-time such as 2026-12-31T23:59:59Z (got ${JSON.stringify(text)})`,
    );
  }
  return ms;
}

/** What of a key's limits the checks below read (a Principal has both). */
export interface AllowedLists {
  /** Model ids the key may use; absent or null: every model. */
  readonly allowedModels?: readonly string[] | null;
  /** Tool names the key may use; absent or null: every tool. */
  readonly allowedTools?: readonly string[] | null;
}

/** Whether the key may use the model of this id (an alias is resolved to its id before). */
export function mayUseModel(key: AllowedLists, modelId: string): boolean {
  return key.allowedModels === undefined || key.allowedModels === null || key.allowedModels.includes(modelId);
}

/** Whether the key may call the tool of this name. */
export function mayUseTool(key: AllowedLists, name: string): boolean {
  return key.allowedTools === undefined || key.allowedTools === null || key.allowedTools.includes(name);
}

/**
 * Refuses a model the key is not allowed (`key_scope_denied`, 403 / permission_denied on every
 * wire), naming the model and what the key may use. Called before any hold.
 */
export function requireModel(key: AllowedLists, modelId: string, asked: string = modelId): void {
  if (mayUseModel(key, modelId)) return;
  const named = asked === modelId ? `'${modelId}'` : `'${asked}' (${modelId})`;
  throw new SvcError(
    'key_scope_denied',
    `This API key may not use the model ${named}; it may use: ${(key.allowedModels ?? []).join(', ')}.`,
    { param: 'model', details: { model: modelId, allowed_models: (key.allowedModels ?? []).join(',') } },
  );
}

/** As `requireModel`, for a tool. */
export function requireTool(key: AllowedLists, name: string): void {
  if (mayUseTool(key, name)) return;
  const allowed = key.allowedTools ?? [];
  throw new SvcError(
    'key_scope_denied',
    `This API key may not use the tool '${name}'; it may use: ${allowed.length === 0 ? 'no tools' : allowed.join(', ')}.`,
    { param: 'name', details: { tool: name, allowed_tools: allowed.join(',') } },
  );
}

/** The stored column of a key's allowed models or tools: a JSON array, or null for everything. */
export function encodeNames(names: readonly string[] | null): string | null {
  return names === null || names.length === 0 ? null : JSON.stringify(names);
}

/**
 * The stored column read back. A damaged value must not widen what the key may use, so it reads
 * as a list naming nothing.
 */
export function decodeNames(stored: string | null): string[] | null {
  if (stored === null) return null;
  try {
    const parsed: unknown = JSON.parse(stored);
    if (Array.isArray(parsed) && parsed.every((p) => typeof p === 'string')) return parsed as string[];
  } catch {
    // Falls through to the empty list below.
  }
  return [];
}
