import type { Principal } from '../auth/types';
import type { UsageStatus } from '../usage/recorder';

/** What a finished request cost; mirrors the proto `Billing` message. */
export interface BillingResult {
  readonly requestId: string;
  readonly cost: bigint;
  readonly balanceAfter: bigint;
}

export interface MeterStart {
  readonly principal: Principal;
  readonly requestId: string;
  /** The id the client gave the request, for correlation only (never billing). */
  readonly clientRequestId?: string | undefined;
  /** 'chat', 'responses' or 'tool'. */
  readonly kind: string;
  /** Model id or tool name. */
  readonly resource: string;
  readonly provider: string;
  /** Upper bound of the cost: the hold. */
  readonly maxCost: bigint;
  /** What the call is priced at, JSON text kept on its usage record (SPEC §15). */
  readonly pricing?: string | undefined;
  /**
   * The key's tokens-per-minute budget as this call already read it (the first model turn of a
   * gRPC call), so the token limit does not read it again; absent: the limit reads it.
   */
  readonly tokenBudget?:
    (() => Promise<{ readonly limit: number; readonly remaining: number; readonly resetMs: number }>) | undefined;
}

/**
 * One metered request: the hold is placed by `createMeter(...).begin()`, and exactly one of
 * `finish` / `fail` closes it (a second close is ignored). Both write the usage record.
 */
export interface MeteredCall {
  /**
   * Settles `cost` (0 releases) and records usage. The charge is never more than the hold: a cost
   * above it is charged at the hold (logged, counted and marked on the span), and the result's
   * `cost` is what was charged.
   */
  finish(outcome: {
    cost: bigint;
    inputTokens?: number;
    outputTokens?: number;
    /** Cache reads and writes among `inputTokens`, for the usage record. */
    cachedTokens?: number;
    cacheWriteTokens?: number;
    /** The one-hour writes among `cacheWriteTokens`. */
    cacheWrite1hTokens?: number;
    /** What the cache reads saved against the input price, in millionths of a credit. */
    cacheSavedMicro?: bigint;
    /** The reasoning tokens among `outputTokens` (the span's only; the record counts them as output). */
    reasoningTokens?: number;
    /** A media call's units for the usage record (images, characters, seconds, searches). */
    mediaUnits?: number;
    /** A token-billed image call's input image tokens among `inputTokens` (priced at image_input_per_1m). */
    imageInputTokens?: number;
    /** What the call was priced at as settled, replacing `begin`'s (an image call: the size it was charged at). */
    pricing?: string;
    status?: UsageStatus;
    /** The upstream reported no usage: the tokens are svc's own count (SPEC §6). */
    estimated?: boolean;
  }): Promise<BillingResult>;
  /** Releases the hold (nothing charged) and records the failure. */
  fail(outcome: {
    errorCode: string;
    status?: UsageStatus;
    inputTokens?: number;
    outputTokens?: number;
    /**
     * No usage record: a hold placed in case and never drawn on (the hosted image_generation
     * tool's, when the model made no image call) is released without a trace.
     */
    unrecorded?: boolean;
  }): Promise<void>;
}

export interface Meter {
  /** Places the hold; throws SvcError insufficient_credit (nothing recorded as charged). */
  begin(start: MeterStart): Promise<MeteredCall>;
}

/** What the meter counts beyond the usage records (the core's metrics). */
export interface MeterMetrics {
  /** A call whose usage was priced above its hold (charged at the hold). */
  overHold(labels: { kind: string; resource: string; provider: string }): void;
  /** A call whose upstream reported no usage (charged from svc's own count). */
  estimated(labels: { kind: string; resource: string; provider: string }): void;
}
