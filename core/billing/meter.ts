import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { requireModel, requireTool } from '../auth/scope';
import type { UsageEntry, UsageRecorder, UsageStatus } from '../usage/recorder';
import type { WalletService } from '../wallet/types';
import type { BillingResult, Meter, MeteredCall, MeterMetrics, MeterStart } from './types';

/** The GenAI semantic conventions' operation of each kind of model call (chat otherwise). */
const GEN_AI_OPERATIONS: Readonly<Record<string, string>> = {
  embedding: 'embeddings',
  image: 'generate_content',
  speech: 'generate_content',
  transcription: 'generate_content',
  moderation: 'generate_content',
  rerank: 'generate_content',
};

/**
 * `gen_ai.provider.name` (SPEC §10, the GenAI semantic conventions' well-known values): the wire an
 * upstream speaks, not svc's provider kind (`openai-responses` is OpenAI; Google's Gemini API is
 * `gcp.gemini`); svc's own sandbox and tool providers keep their names.
 */
export function genAiProvider(provider: string): string {
  switch (provider) {
    case 'openai':
    case 'openai-responses':
      return 'openai';
    case 'gemini':
      return 'gcp.gemini';
    default:
      return provider;
  }
}

/**
 * Reserve, then settle: `begin` holds the upper bound before any upstream is contacted; the
 * returned call is closed exactly once, by `finish` (settle the actual cost) or `fail`
 * (release). Either way one usage record is written and the cost lands on the active span. The
 * record rides on the settle or release, so the wallet writes it in the transaction of the
 * charge: a charge without its record (or the reverse) is never committed. The recorder writes
 * only the records of calls with no wallet write (a refused hold).
 */
export function createMeter(deps: {
  wallet: WalletService;
  usage: UsageRecorder;
  logger: Logger;
  now: () => number;
  /** The holds' lifetime (`limits.hold_ttl_seconds`); a running call extends its hold every third of it. */
  holdTtlSeconds: number;
  metrics?: MeterMetrics;
}): Meter {
  return {
    async begin(start: MeterStart): Promise<MeteredCall> {
      const startedAt = deps.now();
      const span = trace.getActiveSpan();
      const { principal, requestId } = start;
      // The key's allowed models and tools, before anything is held: a refused call costs nothing.
      if (start.kind === 'tool') requireTool(principal, start.resource);
      else requireModel(principal, start.resource);
      span?.setAttributes({ 'svc.account.id': principal.accountId, 'svc.key.id': principal.keyId });
      // GenAI semantic conventions for model calls (tools carry svc.tool.name instead).
      const isModelCall = start.kind !== 'tool';
      if (isModelCall) {
        span?.setAttributes({
          'gen_ai.operation.name': GEN_AI_OPERATIONS[start.kind] ?? 'chat',
          'gen_ai.request.model': start.resource,
          'gen_ai.provider.name': genAiProvider(start.provider),
        });
      }
      const usage = (
        status: UsageStatus,
        inputTokens: number,
        outputTokens: number,
        errorCode: string | null,
        cache: {
          cachedTokens?: number;
          cacheWriteTokens?: number;
          cacheWrite1hTokens?: number;
          cacheSavedMicro?: bigint;
          mediaUnits?: number;
          imageInputTokens?: number;
        } = {},
        pricing: string | undefined = start.pricing,
      ): UsageEntry => ({
        requestId,
        clientRequestId: start.clientRequestId ?? null,
        accountId: principal.accountId,
        keyId: principal.keyId,
        kind: start.kind,
        resource: start.resource,
        provider: start.provider,
        inputTokens,
        outputTokens,
        ...cache,
        status,
        errorCode,
        latencyMs: deps.now() - startedAt,
        ...(pricing === undefined ? {} : { pricing }),
      });
      // A record written on its own (no wallet write carries it): its failure is logged, never
      // put in place of the call's own outcome.
      const recordAlone = (entry: UsageEntry): Promise<void> =>
        deps.usage
          .record({ ...entry, cost: 0n })
          .catch((e: unknown) => deps.logger.error({ err: e, requestId }, 'usage record failed'));

      // A call that cannot cost anything (a free moderation model, SPEC §14) places no hold: it
      // is recorded alone, and never refused for credit it does not need.
      if (start.maxCost === 0n) {
        let closedFree = false;
        return {
          async finish({ inputTokens = 0, outputTokens = 0, status, mediaUnits, pricing }): Promise<BillingResult> {
            if (closedFree) throw new Error(`metered call ${requestId} closed twice`);
            closedFree = true;
            await recordAlone(
              usage(
                status ?? 'ok',
                inputTokens,
                outputTokens,
                null,
                mediaUnits === undefined ? {} : { mediaUnits },
                pricing ?? start.pricing,
              ),
            );
            const wallet = await deps.wallet.get(principal.accountId);
            span?.setAttributes({ 'svc.cost.credits': 0, 'svc.wallet.balance_after': Number(wallet.balance) });
            return { requestId, cost: 0n, balanceAfter: wallet.balance };
          },
          async fail({ errorCode, status = 'error', inputTokens = 0, outputTokens = 0, unrecorded }): Promise<void> {
            if (closedFree) return;
            closedFree = true;
            if (unrecorded !== true) await recordAlone(usage(status, inputTokens, outputTokens, errorCode));
          },
        };
      }
      // The hold as the wallet placed it (a retried request id answers with its first hold).
      let holdAmount: bigint;
      try {
        ({
          hold: { amount: holdAmount },
        } = await deps.wallet.hold({
          accountId: principal.accountId,
          requestId,
          amount: start.maxCost,
          clientRequestId: start.clientRequestId,
          ...(principal.capped ? { lineageId: principal.lineageId } : {}),
        }));
      } catch (error) {
        await recordAlone(usage('refused', 0, 0, (error as { code?: string }).code ?? 'internal'));
        throw error;
      }
      span?.addEvent('svc.wallet.hold', { 'svc.hold.amount': Number(start.maxCost) });
      // The hold's TTL only bounds how long a crashed core's holds stay: a call still running (a
      // slow stream can outlive any TTL) keeps its hold alive, so the reaper never frees credit
      // the call will be charged, and no other call is admitted against it.
      const heartbeat = setInterval(
        () => {
          deps.wallet
            .extend({ accountId: principal.accountId, requestId })
            .then((open) => {
              if (!open) deps.logger.warn({ requestId }, 'the hold of a running call is no longer open');
            })
            .catch((error: unknown) => deps.logger.warn({ err: error, requestId }, 'could not extend a hold'));
        },
        Math.max(100, (deps.holdTtlSeconds * 1000) / 3),
      );
      heartbeat.unref();
      let closed = false;
      return {
        async finish({
          cost,
          inputTokens = 0,
          outputTokens = 0,
          cachedTokens,
          cacheWriteTokens,
          cacheWrite1hTokens,
          cacheSavedMicro,
          reasoningTokens,
          mediaUnits,
          imageInputTokens,
          pricing,
          status,
          estimated = false,
        }): Promise<BillingResult> {
          if (closed) throw new Error(`metered call ${requestId} closed twice`);
          closed = true;
          clearInterval(heartbeat);
          const labels = { kind: start.kind, resource: start.resource, provider: start.provider };
          if (estimated) {
            // SPEC §6: an upstream that reports no usage is charged from svc's own count, and says so.
            span?.setAttribute('svc.usage.estimated', true);
            deps.metrics?.estimated(labels);
            deps.logger.info(
              { requestId, provider: start.provider, model: start.resource, inputTokens, outputTokens },
              'the upstream reported no usage; charged from svc’s own token count',
            );
          }
          // SPEC §6: the hold is the most a call can cost. The wallet never charges more than the
          // hold (nor counts more against the key's caps); a usage priced above it is an upstream
          // that overran the limit it was sent (or an input bound that was too small): charged at
          // the hold, and told.
          const overHold = cost > holdAmount;
          if (overHold) {
            span?.setAttribute('svc.usage.over_hold', true);
            span?.addEvent('svc.usage.over_hold', {
              'svc.usage.cost': Number(cost),
              'svc.hold.amount': Number(holdAmount),
            });
            deps.metrics?.overHold(labels);
            deps.logger.warn(
              {
                requestId,
                provider: start.provider,
                model: start.resource,
                cost: cost.toString(),
                hold: holdAmount.toString(),
                inputTokens,
                outputTokens,
              },
              'usage priced above the hold; charged at the hold',
            );
          }
          // Key by key, not spreads of `{}` or `{ key }`: an object that starts with a spread and
          // gains keys after it gets a map of its own in V8's optimised code (core/chat/prepare.ts).
          const extra: Parameters<typeof usage>[4] = {};
          if (cachedTokens !== undefined) extra.cachedTokens = cachedTokens;
          if (cacheWriteTokens !== undefined) extra.cacheWriteTokens = cacheWriteTokens;
          if (cacheWrite1hTokens !== undefined) extra.cacheWrite1hTokens = cacheWrite1hTokens;
          if (cacheSavedMicro !== undefined) extra.cacheSavedMicro = cacheSavedMicro;
          if (mediaUnits !== undefined) extra.mediaUnits = mediaUnits;
          if (imageInputTokens !== undefined) extra.imageInputTokens = imageInputTokens;
          const entry = usage(
            status ?? (cost > 0n ? 'ok' : 'empty'),
            inputTokens,
            outputTokens,
            null,
            extra,
            pricing ?? start.pricing,
          );
          let settled;
          try {
            settled = await deps.wallet.settle({
              accountId: principal.accountId,
              requestId,
              amount: cost,
              usage: entry,
            });
          } catch (error) {
            // Neither the charge nor its record was committed (or, if the commit's answer was
            // lost, both were, and the hold is closed): the caller gets an error and pays
            // nothing, so its hold is freed now rather than when it expires. A release never
            // undoes a settle.
            await deps.wallet
              .release({ accountId: principal.accountId, requestId })
              .catch((e: unknown) =>
                deps.logger.warn({ err: e, requestId }, 'could not release the hold of a failed settle'),
              );
            throw error;
          }
          const due = overHold ? holdAmount : cost;
          if (settled.charged < due)
            deps.logger.warn(
              { requestId, provider: start.provider, due: due.toString(), charged: settled.charged.toString() },
              'the hold was no longer open and the free credit (or the key’s caps) covered less; charged what they had',
            );
          span?.addEvent('svc.wallet.settle', { 'svc.cost.credits': Number(settled.charged) });
          span?.setAttributes({
            'svc.cost.credits': Number(settled.charged),
            'svc.wallet.balance_after': Number(settled.wallet.balance),
          });
          if (isModelCall)
            span?.setAttributes({
              'gen_ai.usage.input_tokens': inputTokens,
              'gen_ai.usage.output_tokens': outputTokens,
              ...(cachedTokens === undefined ? {} : { 'gen_ai.usage.cache_read.input_tokens': cachedTokens }),
              ...(cacheWriteTokens === undefined
                ? {}
                : { 'gen_ai.usage.cache_creation.input_tokens': cacheWriteTokens }),
              ...(cacheWrite1hTokens === undefined
                ? {}
                : { 'svc.usage.cache_creation_1h.input_tokens': cacheWrite1hTokens }),
              ...(reasoningTokens === undefined ? {} : { 'gen_ai.usage.reasoning.output_tokens': reasoningTokens }),
            });
          return { requestId, cost: settled.charged, balanceAfter: settled.wallet.balance };
        },
        async fail({ errorCode, status = 'error', inputTokens = 0, outputTokens = 0, unrecorded }): Promise<void> {
          if (closed) return;
          closed = true;
          clearInterval(heartbeat);
          const entry = usage(status, inputTokens, outputTokens, errorCode);
          let wallet;
          if (unrecorded === true) {
            ({ wallet } = await deps.wallet.release({ accountId: principal.accountId, requestId }));
            span?.setAttributes({ 'svc.cost.credits': 0, 'svc.wallet.balance_after': Number(wallet.balance) });
            span?.addEvent('svc.wallet.release');
            return;
          }
          try {
            ({ wallet } = await deps.wallet.release({ accountId: principal.accountId, requestId, usage: entry }));
          } catch (error) {
            // The record may be what failed the release's transaction: the hold is freed without
            // it, and the record tried on its own, so that a record never keeps a hold open.
            deps.logger.warn({ err: error, requestId }, 'release with its usage record failed; releasing alone');
            try {
              ({ wallet } = await deps.wallet.release({ accountId: principal.accountId, requestId }));
            } finally {
              await recordAlone(entry);
            }
          }
          span?.setAttributes({ 'svc.cost.credits': 0, 'svc.wallet.balance_after': Number(wallet.balance) });
          span?.addEvent('svc.wallet.release');
        },
      };
    },
  };
}
