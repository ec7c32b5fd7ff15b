import type { PriceBook } from './pricing/book';
import type { Logger } from 'pino';
import type { Meter } from './billing/types';
import type { SvcConfig } from './config/types';
import type { UpstreamHttp } from './providers/http';
import type { Store } from './store/db';
import type { WalletService } from './wallet/types';

/**
 * What the composition root hands to each domain's factory. Factories take the subset they
 * need (`Pick<CoreDeps, 'store' | 'logger'>`), never reach for globals or the environment.
 */
export interface CoreDeps {
  readonly config: SvcConfig;
  readonly store: Store;
  readonly wallet: WalletService;
  readonly meter: Meter;
  readonly logger: Logger;
  /** The one dispatcher every upstream call goes through, handed out under each upstream's name. */
  readonly http: UpstreamHttp;
  /** Unix milliseconds; injectable for tests. */
  readonly now: () => number;
  /** Prices a call at its admission: the rate in force for models priced from the dollar (SPEC §15). */
  readonly prices: PriceBook;
}
