import { SvcError } from '../errors';

/*
 * The fair queue of an upstream origin's connections (issue 48, SPEC §4 "One tenant must not be
 * able to take the service from the others", DESIGN point 7).
 *
 * Every model call to an origin takes one of its slots for as long as it runs (a stream until it
 * ends), and there are as many slots as svc's connection pool to that origin has connections
 * (`upstreamConnections`), so undici's own first-come queue is never where a call waits. A call
 * that finds every slot taken waits in its tenant's (account's) line; a freed slot goes to the
 * next tenant in turn (round robin over the tenants that wait), so one tenant's backlog delays
 * another's call by at most one turn. One tenant may hold at most all but a sixteenth of the
 * slots (`tenantShare`: 120 of 128; every slot when there are fewer than 16), so a tenant that
 * arrives while another floods the origin finds a free slot at once instead of waiting for one to
 * end. A call waits `waitMs` at most, then is refused as each
 * wire's "unavailable, retry" (`unavailable`, a 503/529 with a retry hint) and costs nothing; a
 * call whose client leaves while it waits is taken out of its line at once (its signal), so its
 * hold is released then, not when it would have reached the head.
 */

/** Gives the slot back; a second call does nothing. */
export type Release = () => void;

/** What the queue tells its observer (metrics). */
export interface FairQueueEvents {
  /** A call got its slot after waiting `waitedMs` (0: a free slot at once). */
  granted?(waitedMs: number): void;
  /** A call waited its bound out and was refused. */
  timedOut?(): void;
  /** A call's client left while it waited. */
  abandoned?(): void;
}

export interface FairQueueOptions {
  /** Calls at once: the connections of the origin's pool. */
  readonly slots: number;
  /** How long a call may wait for a slot, in milliseconds (config `limits.upstream_queue_ms`). */
  readonly waitMs: number;
  readonly events?: FairQueueEvents;
  /** Milliseconds, for the wait a grant reports (default `performance.now`). */
  readonly now?: () => number;
}

interface Waiter {
  readonly tenant: string;
  readonly since: number;
  readonly resolve: (release: Release) => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal;
  readonly onAbort: () => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** The refusal of a call that waited `waitMs` for a connection: svc is busy, a retry may succeed. */
export function queueTimeout(waitMs: number): SvcError {
  return new SvcError('unavailable', 'The model provider is busy; retry shortly', {
    details: { retry_after_s: 1, reason: 'upstream_queue' },
    cause: new Error(`no connection to the upstream within ${waitMs} ms`),
  });
}

function cancelled(): SvcError {
  return new SvcError('cancelled', 'The client went away while the call waited for the upstream');
}

/** The slots of `slots` one tenant may hold at once: all but a sixteenth (all when fewer than 16). */
export function tenantShare(slots: number): number {
  return slots - Math.floor(slots / 16);
}

/** One origin's slots and the lines of the tenants waiting for them. */
export class FairQueue {
  #busy = 0;
  #waiting = 0;
  // Slots held per tenant (tenants holding none are not kept).
  readonly #held = new Map<string, number>();
  readonly #share: number;
  // The tenants with calls waiting, in turn order (a Map keeps insertion order): the first is
  // served next; a tenant served with calls left goes to the back.
  readonly #lines = new Map<string, Waiter[]>();
  readonly #now: () => number;

  constructor(private readonly options: FairQueueOptions) {
    this.#now = options.now ?? (() => performance.now());
    this.#share = tenantShare(options.slots);
  }

  /** Slots taken now. */
  get busy(): number {
    return this.#busy;
  }

  /** Calls waiting now. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Calls of `tenant` waiting now. */
  waitingFor(tenant: string): number {
    return this.#lines.get(tenant)?.length ?? 0;
  }

  /**
   * A slot for one call of `tenant`: at once when one is free and nobody waits, else in turn.
   * Rejects with `cancelled` when `signal` aborts first, with `unavailable` after `waitMs`.
   */
  acquire(tenant: string, signal: AbortSignal): Promise<Release> {
    if (signal.aborted) return Promise.reject(cancelled());
    // A free slot the tenant may take goes at once: no waiting call could have it (`#serve`
    // leaves no slot free that a waiting tenant may take).
    if (this.#busy < this.options.slots && this.#heldBy(tenant) < this.#share) {
      this.options.events?.granted?.(0);
      return Promise.resolve(this.#take(tenant));
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        tenant,
        since: this.#now(),
        resolve,
        reject,
        signal,
        onAbort: () => {
          if (!this.#remove(waiter)) return;
          this.options.events?.abandoned?.();
          reject(cancelled());
        },
        timer: undefined,
      };
      waiter.timer = setTimeout(() => {
        if (!this.#remove(waiter)) return;
        this.options.events?.timedOut?.();
        reject(queueTimeout(this.options.waitMs));
      }, this.options.waitMs);
      waiter.timer.unref();
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      const line = this.#lines.get(tenant);
      if (line === undefined) this.#lines.set(tenant, [waiter]);
      else line.push(waiter);
      this.#waiting += 1;
    });
  }

  #heldBy(tenant: string): number {
    return this.#held.get(tenant) ?? 0;
  }

  /** Takes a slot for `tenant`; its release gives it back and serves the next in turn. */
  #take(tenant: string): Release {
    this.#busy += 1;
    this.#held.set(tenant, this.#heldBy(tenant) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#busy -= 1;
      const left = this.#heldBy(tenant) - 1;
      if (left <= 0) this.#held.delete(tenant);
      else this.#held.set(tenant, left);
      this.#serve();
    };
  }

  /** Takes `waiter` out of its line; false when it was no longer there (granted or gone). */
  #remove(waiter: Waiter): boolean {
    const line = this.#lines.get(waiter.tenant);
    const at = line?.indexOf(waiter) ?? -1;
    if (line === undefined || at < 0) return false;
    line.splice(at, 1);
    if (line.length === 0) this.#lines.delete(waiter.tenant);
    this.#waiting -= 1;
    this.#detach(waiter);
    return true;
  }

  #detach(waiter: Waiter): void {
    if (waiter.timer !== undefined) clearTimeout(waiter.timer);
    waiter.signal.removeEventListener('abort', waiter.onAbort);
  }

  /** Hands free slots to the waiting calls, one tenant per turn, skipping tenants at their share. */
  #serve(): void {
    while (this.#busy < this.options.slots && this.#waiting > 0) {
      let next: [string, Waiter[]] | undefined;
      for (const entry of this.#lines) {
        if (this.#heldBy(entry[0]) < this.#share) {
          next = entry;
          break;
        }
      }
      if (next === undefined) return;
      const [tenant, line] = next;
      const waiter = line.shift() as Waiter;
      this.#lines.delete(tenant);
      if (line.length > 0) this.#lines.set(tenant, line);
      this.#waiting -= 1;
      this.#detach(waiter);
      this.options.events?.granted?.(this.#now() - waiter.since);
      waiter.resolve(this.#take(tenant));
    }
  }
}

// Whose call an abort signal belongs to: the core's call context tags its signal with the
// account once the key is known (core/server/context.ts), and the routers read it back from the
// same signal the providers get, so no provider signature has to carry the tenant.
const tenants = new WeakMap<AbortSignal, string>();

/** Marks `signal` (one call's) as `tenant`'s. */
export function tagTenant(signal: AbortSignal, tenant: string): void {
  tenants.set(signal, tenant);
}

/** The tenant of the call `signal` belongs to; '' (one shared line) when none was tagged. */
export function tenantOf(signal: AbortSignal): string {
  return tenants.get(signal) ?? '';
}

/** The fair queues of every origin, created on first use. */
export interface FairQueues {
  /** The queue of `origin` (`scheme://host:port`). */
  forOrigin(origin: string): FairQueue;
  /** Every origin's queue so far (metrics). */
  entries(): IterableIterator<[string, FairQueue]>;
}

export interface FairQueuesOptions {
  /** The slots of an origin: the connections of its pool. */
  readonly slotsOf: (origin: string) => number;
  readonly waitMs: number;
  /** Observers per origin (metrics). */
  readonly events?: (origin: string) => FairQueueEvents;
}

export function createFairQueues(options: FairQueuesOptions): FairQueues {
  const queues = new Map<string, FairQueue>();
  return {
    forOrigin(origin) {
      let queue = queues.get(origin);
      if (queue === undefined) {
        queue = new FairQueue({
          slots: options.slotsOf(origin),
          waitMs: options.waitMs,
          ...(options.events === undefined ? {} : { events: options.events(origin) }),
        });
        queues.set(origin, queue);
      }
      return queue;
    },
    entries: () => queues.entries(),
  };
}

/** The origin of an upstream's base URL; undefined for one without (the sandbox). */
export function originOfBaseUrl(baseUrl: string): string | undefined {
  if (baseUrl === '') return undefined;
  try {
    return new URL(baseUrl).origin;
  } catch {
    return undefined;
  }
}
