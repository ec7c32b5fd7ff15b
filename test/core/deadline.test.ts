import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent } from 'undici';
import { deadline } from '../../core/net/deadline';
import { postJson } from '../../core/payments/http';

/*
 * A deadline fires however often the garbage collector runs while it waits. On Node 20,
 * `AbortSignal.any([signal, AbortSignal.timeout(ms)])` loses its timeout to a GC (nodejs/node#57736):
 * a hung payment gateway then held a top-up for good (CI: "a gateway hang on request fails the
 * payment" waited 30 s on MariaDB instead of 1.5 s).
 */

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

async function underGc<T>(work: Promise<T>, ms: number): Promise<T | 'still waiting'> {
  const collect = setInterval(gc, 20);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<'still waiting'>((resolve) => (timer = setTimeout(() => resolve('still waiting'), ms))),
    ]);
  } finally {
    clearInterval(collect);
    clearTimeout(timer);
  }
}

describe('deadline', () => {
  it('aborts with a TimeoutError after its time, with GC running all along', async () => {
    const made = deadline(150);
    const fired = new Promise<unknown>((resolve) =>
      made.signal.addEventListener('abort', () => resolve(made.signal.reason), { once: true }),
    );
    const reason = await underGc(fired, 3_000);
    assert.ok(reason instanceof DOMException, `fired: ${String(reason)}`);
    assert.equal(reason.name, 'TimeoutError');
    assert.equal(made.expired, true);
  });

  it("follows another signal's abort with its reason, and is not expired", () => {
    const outer = new AbortController();
    const made = deadline(60_000, undefined, outer.signal);
    outer.abort(new Error('client left'));
    assert.equal(made.signal.aborted, true);
    assert.equal((made.signal.reason as Error).message, 'client left');
    assert.equal(made.expired, false);
  });

  it('starts aborted when a signal already is', () => {
    const made = deadline(60_000, AbortSignal.abort('gone'));
    assert.equal(made.signal.aborted, true);
    assert.equal(made.signal.reason, 'gone');
  });

  it('after clear() neither the timer nor the other signal aborts it', async () => {
    const outer = new AbortController();
    const made = deadline(30, outer.signal);
    made.clear();
    await new Promise((resolve) => setTimeout(resolve, 80));
    outer.abort();
    assert.equal(made.signal.aborted, false);
    assert.equal(made.expired, false);
  });

  it("a payment gateway's POST that never answers fails at its timeout, with GC running all along", async () => {
    const hung = new Set<http.ServerResponse>();
    const server = http.createServer((_req, res) => void hung.add(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const agent = new Agent();
    try {
      const { port } = server.address() as AddressInfo;
      const started = Date.now();
      const outcome = await underGc(
        postJson(
          agent,
          { baseUrl: `http://127.0.0.1:${port}`, path: '/pay', body: {}, timeoutMs: 300 },
          new AbortController().signal,
        ).then(
          () => 'answered',
          (error: unknown) => (error as Error).name,
        ),
        5_000,
      );
      assert.equal(outcome, 'TimeoutError', `after ${Date.now() - started} ms`);
    } finally {
      for (const res of hung) res.destroy();
      await agent.close();
      server.close();
    }
  });
});
