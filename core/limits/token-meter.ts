import type { Logger } from 'pino';
import type { Meter } from '../billing/types';
import { assertTokensLeft, type TokenLimiter } from './token-limiter';

/**
 * The meter with the tokens-per-minute limit of model calls around it: `begin` refuses a model
 * call (`tokens_rate_limited`) before any hold when the key's minute budget is spent, and each
 * model call's input plus output tokens are counted when it is settled or released. Tool calls
 * pass through untouched.
 */
export function limitTokens(meter: Meter, limiter: TokenLimiter, logger: Logger): Meter {
  const count = (keyId: string, tokens: number): void => {
    if (!(tokens > 0)) return;
    Promise.resolve(limiter.spend(keyId, tokens)).catch((error: unknown) =>
      logger.error({ err: error }, 'tokens-per-minute count failed'),
    );
  };
  return {
    async begin(start) {
      if (start.kind === 'tool') return meter.begin(start);
      const keyId = start.principal.keyId;
      assertTokensLeft(await (start.tokenBudget?.() ?? limiter.state(keyId)));
      const call = await meter.begin(start);
      // The upstream served these tokens whether or not the books then close cleanly; once per call.
      let counted = false;
      const used = (outcome: { inputTokens?: number; outputTokens?: number }): void => {
        if (counted) return;
        counted = true;
        count(keyId, (outcome.inputTokens ?? 0) + (outcome.outputTokens ?? 0));
      };
      return {
        async finish(outcome) {
          try {
            return await call.finish(outcome);
          } finally {
            used(outcome);
          }
        },
        async fail(outcome) {
          try {
            await call.fail(outcome);
          } finally {
            used(outcome);
          }
        },
      };
    },
  };
}
