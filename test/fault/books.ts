import type { Store } from '../../core/store/db';

/** One ledger entry, one hold, one wallet, as they are in the database. */
export interface Books {
  readonly wallets: { account_id: string; balance: bigint; held: bigint }[];
  readonly entries: { account_id: string; kind: string; amount: bigint; request_id: string }[];
  readonly holds: {
    account_id: string;
    request_id: string;
    /** The id the client sent with the call (x-request-id), kept on the hold for correlation. */
    client_request_id: string | null;
    amount: bigint;
    status: string;
    settled_amount: bigint | null;
    expires_at: bigint;
  }[];
}

export async function readBooks(store: Store): Promise<Books> {
  const big = (v: unknown): bigint => BigInt(v as bigint | number | string);
  const wallets = await store.db.selectFrom('wallets').select(['account_id', 'balance', 'held']).execute();
  const entries = await store.db
    .selectFrom('ledger_entries')
    .select(['account_id', 'kind', 'amount', 'request_id'])
    .execute();
  const holds = await store.db
    .selectFrom('holds')
    .select(['account_id', 'request_id', 'client_request_id', 'amount', 'status', 'settled_amount', 'expires_at'])
    .execute();
  return {
    wallets: wallets.map((w) => ({ account_id: w.account_id, balance: big(w.balance), held: big(w.held) })),
    entries: entries.map((e) => ({ ...e, amount: big(e.amount) })),
    holds: holds.map((h) => ({
      ...h,
      amount: big(h.amount),
      settled_amount: h.settled_amount === null ? null : big(h.settled_amount),
      expires_at: big(h.expires_at),
    })),
  };
}

/**
 * The charges of each `account/client request id` (the x-request-id the client sent; svc mints
 * its own and keeps the client's on the hold), in credits (positive). A charge whose hold has no
 * client id is filed under svc's own id.
 */
export function chargesByClientRequest(books: Books): Map<string, bigint[]> {
  const clientIds = new Map<string, string>();
  for (const h of books.holds)
    if (h.client_request_id !== null) clientIds.set(`${h.account_id}/${h.request_id}`, h.client_request_id);
  const charges = new Map<string, bigint[]>();
  for (const e of books.entries) {
    if (e.kind !== 'charge') continue;
    const id = `${e.account_id}/${clientIds.get(`${e.account_id}/${e.request_id}`) ?? e.request_id}`;
    charges.set(id, [...(charges.get(id) ?? []), -e.amount]);
  }
  return charges;
}

/** The charges of each `account/request id`, in credits (positive). */
export function chargesByRequest(books: Books): Map<string, bigint[]> {
  const charges = new Map<string, bigint[]>();
  for (const e of books.entries) {
    if (e.kind !== 'charge') continue;
    const id = `${e.account_id}/${e.request_id}`;
    charges.set(id, [...(charges.get(id) ?? []), -e.amount]);
  }
  return charges;
}

/**
 * The wallet invariants, checked on the rows themselves; each violation is one line. For every
 * wallet: balance == sum(its ledger entries), held == sum(its pending holds), balance − held ≥ 0.
 * For every hold: a settled one has exactly its settled amount charged (one entry, or none for 0),
 * a released or expired one nothing; no pending hold is past its expiry at `now`. No request id
 * is charged twice, and no charge lacks a hold.
 */
export function bookViolations(books: Books, now: number): string[] {
  const out: string[] = [];
  const sums = new Map<string, bigint>();
  for (const e of books.entries) sums.set(e.account_id, (sums.get(e.account_id) ?? 0n) + e.amount);
  const held = new Map<string, bigint>();
  for (const h of books.holds) {
    if (h.status === 'held') held.set(h.account_id, (held.get(h.account_id) ?? 0n) + h.amount);
  }
  for (const w of books.wallets) {
    const ledger = sums.get(w.account_id) ?? 0n;
    if (w.balance !== ledger) out.push(`${w.account_id}: balance ${w.balance} != sum(ledger) ${ledger}`);
    const pending = held.get(w.account_id) ?? 0n;
    if (w.held !== pending) out.push(`${w.account_id}: held ${w.held} != sum(pending holds) ${pending}`);
    if (w.balance - w.held < 0n) out.push(`${w.account_id}: balance − held = ${w.balance - w.held} < 0`);
  }
  const charges = chargesByRequest(books);
  const holdIds = new Set<string>();
  for (const h of books.holds) {
    const id = `${h.account_id}/${h.request_id}`;
    holdIds.add(id);
    const charged = charges.get(id) ?? [];
    if (h.status === 'settled') {
      const expected = h.settled_amount ?? 0n;
      const ok = expected === 0n ? charged.length === 0 : charged.length === 1 && charged[0] === expected;
      if (!ok) out.push(`${id}: settled for ${expected} but charged [${charged.join(', ')}]`);
      if (expected > h.amount) out.push(`${id}: settled ${expected} above its hold ${h.amount}`);
    } else if (h.status === 'released' || h.status === 'expired') {
      if (charged.length > 0) out.push(`${id}: ${h.status} but charged [${charged.join(', ')}]`);
    } else if (h.status === 'held') {
      if (h.expires_at < BigInt(now)) out.push(`${id}: still pending past its expiry`);
    } else {
      out.push(`${id}: unknown hold status ${h.status}`);
    }
  }
  for (const [id, list] of charges) {
    if (list.length > 1) out.push(`${id}: charged ${list.length} times`);
    if (!holdIds.has(id)) out.push(`${id}: charged without a hold`);
  }
  return out;
}
