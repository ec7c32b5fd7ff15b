// What the bench's side-by-side scripts share (bench/ab-cpu.ts, build-ab.ts, fast-path-ab.ts,
// anthropic-ab.ts): their flags, a warm-up of each side, then rounds in which each side is
// loaded in turn by autocannon, the order reversed every other round (A B, B A, …) so that a
// machine whose load drifts weighs on both alike; each round's req/s and process CPU per answered
// request (/proc), their medians and ratios; and each svc's books checked as it stops.
// `npm run bench` stays the judge of goals; these isolate what one change does.
import { autocannon, type AutocannonSpec } from './autocannon';
import { cpuMeter } from './cpu';
import type { SvcPeer } from './peers';

/** The value after `name` on the command line, or undefined. */
export function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

/** `name N` on the command line as a number, or `fallback`. */
export function numberFlag(name: string, fallback: number): number {
  const value = flag(name);
  return value === undefined ? fallback : Number(value);
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return NaN;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** One side of a comparison: the load it takes, and the processes whose CPU it spends. */
export interface AbSide {
  readonly name: string;
  readonly load: Omit<AutocannonSpec, 'seconds'>;
  /** Every process of the side (a split svc: its gateway and its core; workers are found below these). */
  readonly pids: readonly number[];
  /** A split svc's gateway: its CPU is reported apart too (`NAME gateway`, `NAME core`). */
  readonly gatewayPid?: number;
}

/** A side's readings, one per round. */
export interface AbReadings {
  readonly rps: number[];
  readonly cpu: number[];
}

/**
 * `peer` as a side: autocannon at `connections` (32) on `path` of its gateway (the chat
 * completions by default) with svc's key as a bearer token unless `headers` are given.
 */
export function svcSide(
  name: string,
  peer: SvcPeer,
  load: {
    readonly body: string;
    readonly path?: string;
    readonly headers?: Record<string, string>;
    readonly connections?: number;
  },
): AbSide {
  const split = peer.corePid !== null;
  return {
    name,
    load: {
      url: `${peer.gatewayUrl}${load.path ?? '/v1/openai/chat/completions'}`,
      headers: load.headers ?? { authorization: `Bearer ${peer.key}` },
      body: load.body,
      connections: load.connections ?? 32,
    },
    pids: peer.pids ?? [peer.pid ?? 0, ...(split ? [peer.corePid as number] : [])],
    ...(split && peer.pid !== null ? { gatewayPid: peer.pid } : {}),
  };
}

/**
 * Warms each side for `warmupSeconds` (so that neither is measured while its code is still being
 * compiled), then runs `rounds` rounds of `seconds` each, every side in turn, the order reversed
 * every other round; prints each round and resolves each side's readings by name.
 */
export async function interleave(
  sides: readonly AbSide[],
  options: { readonly rounds: number; readonly seconds: number; readonly warmupSeconds: number },
): Promise<Map<string, AbReadings>> {
  const readings = new Map<string, AbReadings>();
  const add = (name: string, rps: number, cpu: number): void => {
    const r = readings.get(name) ?? { rps: [], cpu: [] };
    r.rps.push(rps);
    r.cpu.push(cpu);
    readings.set(name, r);
  };
  for (const side of sides) await autocannon({ ...side.load, seconds: options.warmupSeconds });
  for (let round = 0; round < options.rounds; round++) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      const all = cpuMeter(side.pids);
      const gateway = side.gatewayPid === undefined ? undefined : cpuMeter([side.gatewayPid]);
      const r = await autocannon({ ...side.load, seconds: options.seconds });
      const cpu = all.perRequest(r.total) ?? NaN;
      add(side.name, r.requestsPerSecond, cpu);
      if (gateway !== undefined) {
        const own = gateway.perRequest(r.total) ?? NaN;
        add(`${side.name} gateway`, r.requestsPerSecond, own);
        add(`${side.name} core`, r.requestsPerSecond, cpu - own);
      }
      console.log(
        `  round ${round + 1} ${side.name}: ${Math.round(r.requestsPerSecond)} req/s, p99 ${r.p99} ms, ${Math.round(cpu)} µs CPU/request`,
      );
    }
  }
  return readings;
}

/** `title: A n req/s, B m req/s (median of N): n/m×; CPU/request A x µs, B y µs: x/y×`. */
export function comparison(
  title: string,
  [aName, a]: readonly [string, AbReadings | undefined],
  [bName, b]: readonly [string, AbReadings | undefined],
): string {
  const [ar, br] = [median(a?.rps ?? []), median(b?.rps ?? [])];
  const [ac, bc] = [median(a?.cpu ?? []), median(b?.cpu ?? [])];
  return (
    `${title}: ${aName} ${Math.round(ar)} req/s, ${bName} ${Math.round(br)} req/s (median of ${a?.rps.length ?? 0}): ${(ar / br).toFixed(2)}×; ` +
    `CPU/request ${aName} ${Math.round(ac)} µs, ${bName} ${Math.round(bc)} µs: ${(ac / bc).toFixed(2)}×`
  );
}

/** One line per reading: its median and least CPU per request, every round's, and its median req/s. */
export function readingLines(readings: ReadonlyMap<string, AbReadings>): string[] {
  return [...readings].map(
    ([name, r]) =>
      `${name.padEnd(38)} median ${median(r.cpu).toFixed(0).padStart(5)} min ${Math.min(...r.cpu)
        .toFixed(0)
        .padStart(5)} µs CPU/request (${r.cpu.map((v) => v.toFixed(0)).join(' ')})  ${median(r.rps)
        .toFixed(0)
        .padStart(6)} req/s`,
  );
}

/**
 * Stops every svc and checks its books (the wallet charged what the usage records say, every ok
 * call its price, nothing held), printing each; resolves the ok calls of each, and rejects after
 * all were checked when any book did not balance.
 */
export async function checkBooks(peers: readonly (readonly [string, SvcPeer])[]): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  const failed: string[] = [];
  for (const [name, peer] of peers) {
    try {
      const ok = await peer.closeAndCheck();
      calls.set(name, ok);
      console.log(`  svc ${name}: billed ${ok} calls exactly`);
    } catch (error) {
      failed.push(`${name}: ${String(error)}`);
      console.log(`  svc ${name}: books: ${String(error)}`);
    }
  }
  if (failed.length > 0) throw new Error(`books did not balance: ${failed.join('; ')}`);
  return calls;
}
