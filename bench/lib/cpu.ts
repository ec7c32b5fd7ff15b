// Process CPU, read from /proc: user + system time of a process and every process below it (the
// workers of `svc serve --workers N` are children of its primary), in microseconds. The bench
// divides what a server spent during a measurement by the requests it answered, so "µs of CPU per
// request" shows where the time goes whatever else the machine is doing.
import fs from 'node:fs';

// Linux reports times in clock ticks; USER_HZ is 100 on every Linux build that matters here.
const TICK_US = 10_000;

function children(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    try {
      const list = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      if (list !== '') out.push(...list.split(/\s+/).map(Number));
    } catch {
      // a thread that ended while we read
    }
  }
  return out;
}

function ownCpuMicros(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: the fields after it start past its ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state (field 3).
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return 0;
  }
}

/** CPU time (µs) of `pids` and all their descendants, or null where /proc cannot be read. */
export function treeCpuMicros(pids: readonly number[]): number | null {
  if (!fs.existsSync('/proc/self/stat')) return null;
  let total = 0;
  const seen = new Set<number>();
  const visit = (pid: number): void => {
    if (seen.has(pid)) return;
    seen.add(pid);
    total += ownCpuMicros(pid);
    for (const child of children(pid)) visit(child);
  };
  for (const pid of pids) visit(pid);
  return total;
}

/** Starts a CPU reading of `pids`; `perRequest(n)` is the µs spent since, per answered request. */
export function cpuMeter(pids: readonly number[]): { perRequest(answered: number): number | undefined } {
  const start = treeCpuMicros(pids);
  return {
    perRequest(answered) {
      const end = treeCpuMicros(pids);
      if (start === null || end === null || answered <= 0) return undefined;
      return (end - start) / answered;
    },
  };
}

/** CPU time (µs) of `pid` alone (all its threads), or null where /proc cannot be read. */
export function processCpuMicros(pid: number): number | null {
  if (!fs.existsSync(`/proc/${pid}/stat`)) return null;
  return ownCpuMicros(pid);
}

/** The direct children of `pid` (the workers of a `node:cluster` primary). */
export function childPids(pid: number): number[] {
  return children(pid);
}

/**
 * CPU time (µs) of this process and of its children that have exited and were waited for
 * (utime, stime, cutime, cstime): the bench's load generators (autocannon, ./loadgen) run as such
 * children, so the difference across a measurement is what the load cost.
 */
export function selfAndReapedMicros(): number | null {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK_US;
  } catch {
    return null;
  }
}
