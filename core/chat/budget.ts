import type { Logger } from 'pino';
import { requireModel, requireTool } from '../auth/scope';
import type { BillingResult, Meter, MeteredCall, MeterStart } from '../billing/types';
import { isSvcError, SvcError } from '../errors';

/*
 * What a call can afford, and the budget of an agent loop.
 *
 * A refused hold says what was free: the wallet's `available`, or the room left under the key's
 * cap (`cap - spent - held`). A call whose output limit svc chose (the client set none) is fitted
 * to that room instead of refused (SPEC §6, small wallets); an agent loop holds its whole bound
 * once and runs its steps inside it (SPEC §6, agent loops).
 */

/** The least output limit svc will fit a call to: below it an answer is rarely of use. */
export const MIN_FITTED_OUTPUT_TOKENS = 16;

/** The credits a refused hold could have had instead, or undefined when the refusal does not say. */
export function affordableFrom(error: unknown): bigint | undefined {
  if (!isSvcError(error)) return undefined;
  const d = error.details ?? {};
  const num = (key: string): number | undefined => (typeof d[key] === 'number' ? (d[key] as number) : undefined);
  if (error.code === 'insufficient_credit') {
    const available = num('available');
    return available === undefined ? undefined : BigInt(Math.max(0, Math.trunc(available)));
  }
  if (error.code === 'key_cap_exceeded') {
    const cap = num('cap');
    const spent = num('spent');
    const held = num('held');
    if (cap === undefined || spent === undefined || held === undefined) return undefined;
    return BigInt(Math.max(0, Math.trunc(cap - spent - held)));
  }
  return undefined;
}

/** Whether an error is a hold refused for credit or for the key's cap. */
export function isCreditRefusal(error: unknown): error is SvcError {
  return isSvcError(error) && (error.code === 'insufficient_credit' || error.code === 'key_cap_exceeded');
}

/**
 * The largest output limit in [`min`, `max`] whose hold (`holdOf`, increasing in the limit) fits
 * `affordable`, or undefined when even `min` does not.
 */
export function fitLimit(
  holdOf: (limit: number) => bigint,
  affordable: bigint,
  min: number,
  max: number,
): number | undefined {
  if (max < min || holdOf(min) > affordable) return undefined;
  let lo = min;
  let hi = max;
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    if (holdOf(mid) <= affordable) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** One step of a loop as the budget saw it: for the loop's usage record and its log line. */
export interface LoopStep {
  readonly requestId: string;
  readonly kind: string;
  readonly resource: string;
  readonly charged: bigint;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number;
  readonly cacheWriteTokens: number;
  readonly cacheWrite1hTokens: number;
  readonly cacheSavedMicro: bigint;
  /** A media step's units (images made). */
  readonly mediaUnits: number;
}

/** The budget of one agent loop: a meter for its steps, and the one settle that closes it. */
export interface LoopBudget {
  /** Hands each step its part of the loop's hold; a step that does not fit is refused as a wallet would. */
  readonly meter: Meter;
  /** Credits the steps have been charged so far. */
  spent(): bigint;
  /** The steps charged so far, in order. */
  steps(): readonly LoopStep[];
  /**
   * Settles the loop's hold with what its steps were charged (a release when nothing was) and
   * writes its one usage record. Exactly once; later calls return the first result. `quiet`: a
   * budget no step ever began is released without a usage record (a hold placed in case).
   */
  close(status: 'ok' | 'cancelled' | 'error', quiet?: boolean): Promise<BillingResult>;
}

/**
 * Places the loop's one hold (`start.maxCost`, the whole bound) through the real meter, and
 * returns the budget its steps draw from. Each step reserves its own upper bound inside what is
 * left, is charged at most that reservation, and gives back the rest; nothing touches the wallet
 * until `close`, which charges the sum once under the loop's request id. A step refused for the
 * budget never reaches its upstream; the loop decides what to answer.
 */
export async function openLoopBudget(meter: Meter, start: MeterStart, logger: Logger): Promise<LoopBudget> {
  const outer: MeteredCall = await meter.begin(start);
  let remaining = start.maxCost;
  let spent = 0n;
  let begun = 0;
  const steps: LoopStep[] = [];
  let closing: Promise<BillingResult> | undefined;

  const stepMeter: Meter = {
    async begin(step: MeterStart): Promise<MeteredCall> {
      if (step.kind === 'tool') requireTool(step.principal, step.resource);
      else requireModel(step.principal, step.resource);
      if (closing !== undefined) throw new SvcError('internal', `step ${step.requestId} after its loop closed`);
      if (step.maxCost > remaining) {
        throw new SvcError(
          'insufficient_credit',
          `This step of the response needs up to ${step.maxCost.toString()} credits but its hold has ${remaining.toString()} left`,
          {
            details: {
              available: Number(remaining),
              required: Number(step.maxCost),
              loop: 1,
            },
          },
        );
      }
      const reserved = step.maxCost;
      remaining -= reserved;
      begun += 1;
      let done = false;
      return {
        async finish(outcome) {
          if (done) throw new Error(`loop step ${step.requestId} closed twice`);
          done = true;
          const charged = outcome.cost < reserved ? outcome.cost : reserved;
          if (outcome.cost > reserved)
            logger.warn(
              {
                requestId: step.requestId,
                resource: step.resource,
                provider: step.provider,
                cost: outcome.cost.toString(),
                hold: reserved.toString(),
              },
              'usage above the hold of a loop step; charged at the hold',
            );
          remaining += reserved - charged;
          spent += charged;
          steps.push({
            requestId: step.requestId,
            kind: step.kind,
            resource: step.resource,
            charged,
            inputTokens: outcome.inputTokens ?? 0,
            outputTokens: outcome.outputTokens ?? 0,
            cachedTokens: outcome.cachedTokens ?? 0,
            cacheWriteTokens: outcome.cacheWriteTokens ?? 0,
            cacheWrite1hTokens: outcome.cacheWrite1hTokens ?? 0,
            cacheSavedMicro: outcome.cacheSavedMicro ?? 0n,
            mediaUnits: outcome.mediaUnits ?? 0,
          });
          // The wallet is settled once, when the loop closes: the balance after is the loop's.
          return { requestId: step.requestId, cost: charged, balanceAfter: 0n };
        },
        async fail() {
          if (done) return;
          done = true;
          remaining += reserved;
        },
      };
    },
  };

  return {
    meter: stepMeter,
    spent: () => spent,
    steps: () => steps,
    close(status, quiet = false) {
      closing ??= (async () => {
        const model = steps.filter((s) => s.kind !== 'tool');
        const sum = (pick: (s: LoopStep) => number): number => model.reduce((n, s) => n + pick(s), 0);
        if (spent === 0n) {
          await outer.fail({
            errorCode: status === 'ok' ? 'empty' : status,
            status: status === 'ok' ? 'empty' : status,
            ...(quiet && begun === 0 ? { unrecorded: true } : {}),
          });
          // Nothing was delivered: the caller gets an error, never this billing.
          return { requestId: start.requestId, cost: 0n, balanceAfter: 0n };
        }
        return outer.finish({
          cost: spent,
          inputTokens: sum((s) => s.inputTokens),
          outputTokens: sum((s) => s.outputTokens),
          cachedTokens: sum((s) => s.cachedTokens),
          cacheWriteTokens: sum((s) => s.cacheWriteTokens),
          cacheWrite1hTokens: sum((s) => s.cacheWrite1hTokens),
          cacheSavedMicro: model.reduce((n, s) => n + s.cacheSavedMicro, 0n),
          ...(steps.some((s) => s.mediaUnits > 0) ? { mediaUnits: sum((s) => s.mediaUnits) } : {}),
          status: status === 'error' ? 'ok' : status,
        });
      })();
      return closing;
    },
  };
}
