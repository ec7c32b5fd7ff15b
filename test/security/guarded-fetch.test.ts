import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import {
  guardedFetch,
  GuardedFetchError,
  isPublicAddress,
  type GuardedFetchOptions,
  type ResolvedAddress,
} from '../../core/net/guarded-fetch';
import { DOCUMENT_UNREADABLE, loadClientDocument } from '../../core/oauth/metadata-document';
import { isSvcError } from '../../core/errors';

// Issue 31, findings 1-3: every fetch of a client-chosen URL goes through one guard. These run
// real servers on loopback; names resolve through the fetcher's injectable resolver (an
// /etc/hosts-style table), so a "public-looking" name can point at 127.0.0.1 or ::1.

/** A table resolver that records every name it was asked for. */
function table(entries: Record<string, readonly ResolvedAddress[]>) {
  const asked: string[] = [];
  const resolve = async (name: string): Promise<readonly ResolvedAddress[]> => {
    asked.push(name);
    const found = entries[name];
    if (found === undefined) throw new Error(`ENOTFOUND ${name}`);
    return found;
  };
  return { asked, resolve };
}

const V4_LOOPBACK: ResolvedAddress[] = [{ address: '127.0.0.1', family: 4 }];

/** A raw TCP listener that counts the connections it accepted (none must arrive for a refused name). */
async function tcpListener(host: string): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let count = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    count += 1;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function httpServer(
  handler: http.RequestListener,
): Promise<{ port: number; server: http.Server; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function refusal(url: string, options: GuardedFetchOptions): Promise<string> {
  try {
    await guardedFetch(url, { padFailures: false, timeoutMs: 2000, ...options });
  } catch (error) {
    assert.ok(error instanceof GuardedFetchError, String(error));
    return error.reason;
  }
  assert.fail(`${url} was fetched`);
}

describe('the guarded fetcher of client-chosen URLs (issue 31)', function () {
  this.timeout(30_000);

  it('classifies addresses with ipaddr.js: only public unicast passes, IPv4-mapped judged as IPv4', () => {
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '255.255.255.255',
      '224.0.0.1',
      '240.0.0.1',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '64:ff9b::7f00:1',
      '2002:7f00:1::1',
      'not an address',
    ])
      assert.equal(isPublicAddress(address), false, address);
    for (const address of ['93.184.215.14', '8.8.8.8', '::ffff:8.8.8.8', '2606:4700:4700::1111'])
      assert.equal(isPublicAddress(address), true, address);
  });

  it('a name that resolves to 127.0.0.1 is refused before any connection', async () => {
    const target = await tcpListener('127.0.0.1');
    try {
      const names = table({ 'docs.example.com': V4_LOOPBACK });
      const reason = await refusal(`https://docs.example.com:${target.port}/client.json`, { resolve: names.resolve });
      assert.match(reason, /127\.0\.0\.1.*not a public address/);
      const viaHttp = await refusal(`http://docs.example.com:${target.port}/client.json`, {
        resolve: names.resolve,
        allowHttp: true,
      });
      assert.match(viaHttp, /not a public address/);
      assert.equal(target.connections(), 0);
    } finally {
      await target.close();
    }
  });

  it('a name that resolves to ::1, or to ::ffff:127.0.0.1, or to a public and a private address, is refused', async () => {
    let target: Awaited<ReturnType<typeof tcpListener>> | undefined;
    try {
      target = await tcpListener('::1');
    } catch {
      target = await tcpListener('127.0.0.1'); // no IPv6 loopback here: the refusal needs no listener
    }
    try {
      const names = table({
        'v6.example.com': [{ address: '::1', family: 6 }],
        'mapped.example.com': [{ address: '::ffff:127.0.0.1', family: 6 }],
        'mixed.example.com': [
          { address: '93.184.215.14', family: 4 },
          { address: '127.0.0.1', family: 4 },
        ],
        'metadata.example.com': [{ address: '169.254.169.254', family: 4 }],
      });
      for (const name of ['v6.example.com', 'mapped.example.com', 'mixed.example.com', 'metadata.example.com'])
        assert.match(
          await refusal(`https://${name}:${target.port}/c.json`, { resolve: names.resolve }),
          /not a public address/,
          name,
        );
      for (const literal of ['[::1]', '127.0.0.1', '[::ffff:7f00:1]', '169.254.169.254', '0.0.0.0'])
        assert.match(
          await refusal(`https://${literal}:${target.port}/c.json`, { resolve: names.resolve }),
          /not a public address/,
          literal,
        );
      assert.equal(target.connections(), 0);
    } finally {
      await target.close();
    }
  });

  it('connects to the address it checked: the name is resolved once, never again by the connection', async () => {
    const doc = await httpServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    try {
      // `.invalid` never resolves in DNS (RFC 6761): only the pinned address can reach the server.
      const names = table({ 'docs.invalid': V4_LOOPBACK });
      const res = await guardedFetch(`http://docs.invalid:${doc.port}/c.json`, {
        resolve: names.resolve,
        allowHttp: true,
        allowPrivateAddresses: true,
      });
      assert.equal(res.body.toString(), '{}');
      assert.deepEqual(names.asked, ['docs.invalid']);
    } finally {
      await doc.close();
    }
  });

  it('https only unless the test switch is on', async () => {
    assert.match(await refusal('http://93.184.215.14/c.json', {}), /scheme http: is not allowed/);
    assert.match(await refusal('ftp://93.184.215.14/c.json', { allowHttp: true }), /scheme ftp: is not allowed/);
  });

  it('follows no redirect, least of all to an internal address', async () => {
    const internal = await tcpListener('127.0.0.1');
    const doc = await httpServer((_req, res) =>
      res.writeHead(302, { location: `http://127.0.0.1:${internal.port}/secret` }).end(),
    );
    try {
      const names = table({ 'docs.invalid': V4_LOOPBACK });
      const reason = await refusal(`http://docs.invalid:${doc.port}/c.json`, {
        resolve: names.resolve,
        allowHttp: true,
        allowPrivateAddresses: true,
      });
      assert.match(reason, /HTTP 302/);
      assert.equal(internal.connections(), 0);
    } finally {
      await doc.close();
      await internal.close();
    }
  });

  it('a chunked body with no Content-Length is cut at 64 KiB, not read to its end', async () => {
    let written = 0;
    // What the server had written when its response closed (the reader hung up, or it ended).
    let closedAt: (bytes: number) => void = () => undefined;
    const closedAfter = new Promise<number>((resolve) => (closedAt = resolve));
    const doc = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      const pump = (): void => {
        // 256 MiB unless the reader hangs up first.
        while (written < 256 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => closedAt(written));
      pump();
    });
    try {
      const names = table({ 'docs.invalid': V4_LOOPBACK });
      const reason = await refusal(`http://docs.invalid:${doc.port}/c.json`, {
        resolve: names.resolve,
        allowHttp: true,
        allowPrivateAddresses: true,
      });
      assert.match(reason, /passed the cap of 65536 bytes/);
      // What the server wrote before the hang-up: socket buffers, far below the 256 MiB it offered.
      const wrote = await closedAfter;
      assert.ok(wrote < 16 * 1024 * 1024, `server wrote ${wrote} bytes`);
    } finally {
      await doc.close();
    }
  });

  it('a declared Content-Length above the cap is refused without reading', async () => {
    const doc = await httpServer((_req, res) =>
      res.writeHead(200, { 'content-length': String(1024 * 1024) }).end(Buffer.alloc(1024 * 1024)),
    );
    try {
      const names = table({ 'docs.invalid': V4_LOOPBACK });
      assert.match(
        await refusal(`http://docs.invalid:${doc.port}/c.json`, {
          resolve: names.resolve,
          allowHttp: true,
          allowPrivateAddresses: true,
        }),
        /Content-Length 1048576/,
      );
    } finally {
      await doc.close();
    }
  });

  it('a document that never finishes fails at the deadline; every failure waits for it, so time tells nothing', async () => {
    const doc = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"client_id":'); // and never more
    });
    const closed = await tcpListener('127.0.0.1');
    const closedPort = closed.port;
    await closed.close(); // nothing listens there now: connection refused at once
    try {
      const names = table({ 'docs.invalid': V4_LOOPBACK });
      const options = { resolve: names.resolve, allowHttp: true, allowPrivateAddresses: true, timeoutMs: 400 };
      const slow = await guardedFetch(`http://docs.invalid:${doc.port}/c.json`, options).then(
        () => 'fetched',
        (e: unknown) => (e instanceof GuardedFetchError ? e.reason : String(e)),
      );
      assert.match(slow, /within 400 ms/);
      // A refused connection fails at once underneath, but is answered no sooner than the deadline
      // (a lower bound only: timers never fire early, whatever the machine's load).
      const started = Date.now();
      const refused = await guardedFetch(`http://docs.invalid:${closedPort}/c.json`, options).then(
        () => 'fetched',
        (e: unknown) => (e instanceof GuardedFetchError ? e.reason : String(e)),
      );
      assert.match(refused, /ECONNREFUSED/);
      assert.ok(Date.now() - started >= 390, 'a fast failure is held to the deadline');
    } finally {
      await doc.close();
    }
  });

  describe('a Client ID Metadata Document: one sentence for the browser, the detail for the log', () => {
    async function loadError(body: string, status: number): Promise<{ message: string; logged: string[] }> {
      const doc = await httpServer((_req, res) => res.writeHead(status, { 'content-type': 'text/plain' }).end(body));
      const logged: string[] = [];
      const logger = {
        warn: (fields: { reason: string }) => logged.push(fields.reason),
      } as unknown as Logger;
      try {
        const names = table({ 'docs.invalid': V4_LOOPBACK });
        const url = `http://docs.invalid:${doc.port}/c.json`;
        await loadClientDocument(url, {
          insecure: true,
          logger,
          fetchOptions: { resolve: names.resolve, padFailures: false },
        });
      } catch (error) {
        assert.ok(isSvcError(error));
        assert.equal(error.details?.['oauth_error'], 'invalid_client');
        return { message: error.message, logged };
      } finally {
        await doc.close();
      }
      return assert.fail('the document was accepted');
    }

    it('an internal text page and a 404 read the same, with neither status nor content', async () => {
      const text = await loadError('db_password=hunter2\n', 200);
      const missing = await loadError('not here', 404);
      assert.equal(text.message, DOCUMENT_UNREADABLE);
      assert.equal(missing.message, DOCUMENT_UNREADABLE);
      assert.doesNotMatch(text.message, /db_passw|JSON|token/);
      assert.doesNotMatch(missing.message, /404/);
      assert.match(text.logged.join(), /JSON/);
      assert.match(missing.logged.join(), /HTTP 404/);
    });

    it('without the test switch a document at a name resolving to loopback is never fetched', async () => {
      const target = await tcpListener('127.0.0.1');
      try {
        const names = table({ 'app.example.com': V4_LOOPBACK });
        await assert.rejects(
          loadClientDocument(`https://app.example.com:${target.port}/c.json`, {
            insecure: false,
            fetchOptions: { resolve: names.resolve, padFailures: false },
          }),
          (error: unknown) => isSvcError(error) && error.message === DOCUMENT_UNREADABLE,
        );
        assert.equal(target.connections(), 0);
      } finally {
        await target.close();
      }
    });
  });
});
