import type { BreakerConfig } from '../config/types';

/** Where a breaker stands: closed (calls pass), open (skipped), half-open (one probe in flight or due). */
export type BreakerState = 'closed' | 'open' | 'half-open';

/**
 * One upstream's circuit breaker (SPEC §4): `failures` consecutive failures open it for
 * `openS` seconds; then exactly one call probes it (half-open), and that call's success closes
 * it, its failure opens it again. State lives in this process (a replica each, as the SPEC allows).
 */
export interface Breaker {
  state(): BreakerState;
  /** Whether a call may go to the upstream now; a true answer in half-open takes the one probe. */
  tryAcquire(): boolean;
  /** The upstream answered (any answer that is not its own failure). */
  success(): void;
  /** The upstream failed (connection, timeout, 429, 5xx, garbage). */
  failure(): void;
  /** A call that took the probe ended with no verdict (the client went away): free the probe. */
  abandon(): void;
}

/** Creates a closed breaker; `now` is Unix milliseconds (injectable for tests). */
export function createBreaker(
  config: BreakerConfig,
  now: () => number,
  onChange?: (state: BreakerState) => void,
): Breaker {
  let state: BreakerState = 'closed';
  let consecutive = 0;
  let openUntil = 0;
  let probing = false;

  const move = (next: BreakerState): void => {
    if (next === state) return;
    state = next;
    onChange?.(next);
  };

  return {
    state() {
      if (state === 'open' && now() >= openUntil) return 'half-open';
      return state;
    },
    tryAcquire() {
      if (state === 'closed') return true;
      if (state === 'open') {
        if (now() < openUntil) return false;
        move('half-open');
      }
      if (probing) return false;
      probing = true;
      return true;
    },
    success() {
      consecutive = 0;
      probing = false;
      move('closed');
    },
    failure() {
      consecutive += 1;
      const wasProbe = state === 'half-open';
      probing = false;
      if (wasProbe || consecutive >= config.failures) {
        openUntil = now() + config.openS * 1000;
        move('open');
      }
    },
    abandon() {
      probing = false;
    },
  };
}
