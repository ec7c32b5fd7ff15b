import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { Agent } from 'undici';
import { startSvc, type TestSvc } from '../helpers/harness';

/*
 * Issue 48 point 5: open connections are capped in all and per client address (a refusal is a
 * quick 503 in the wire's shape, counted as svc's own), and a request head or body that trickles
 * is cut after seconds.
 */

const CONFIG = `limits:
  max_connections: 50
  max_connections_per_address: 2
  headers_timeout_seconds: 1
  request_timeout_seconds: 3
  body_idle_seconds: 1
`;

interface Raw {
  readonly socket: net.Socket;
  /** Everything received so far. */
  text(): string;
  /** Resolves with everything received once the server closes the connection. */
  readonly closed: Promise<string>;
  /** Resolves once the received text matches `pattern`. */
  received(pattern: RegExp): Promise<string>;
}

/** A raw TCP connection to svc's HTTP port, from `localAddress`. */
async function connect(svc: TestSvc, localAddress = '127.0.0.1'): Promise<Raw> {
  const url = new URL(svc.baseUrl);
  const socket = net.connect({ host: url.hostname, port: Number(url.port), localAddress });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let text = '';
  const watchers: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    for (const watch of [...watchers]) watch();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(text)));
  return {
    socket,
    text: () => text,
    closed,
    received: (pattern) =>
      new Promise<string>((resolve, reject) => {
        const check = (): void => {
          if (pattern.test(text)) resolve(text);
        };
        watchers.push(check);
        check();
        void closed.then(() => (pattern.test(text) ? resolve(text) : reject(new Error(`closed with: ${text}`))));
      }),
  };
}

const get = (path: string): string => `GET ${path} HTTP/1.1\r\nhost: svc\r\nconnection: keep-alive\r\n\r\n`;

function post(path: string, body: string, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nhost: svc\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
}

/** GET /healthz from `localAddress` with Node's client (a fresh connection). */
function healthz(svc: TestSvc, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${svc.baseUrl}/healthz`, { localAddress, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

async function metric(svc: TestSvc, series: string): Promise<number> {
  const text = await svc.core.metrics.registry.render();
  const line = text.split('\n').find((l) => l.startsWith(series));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

describe('connections bounded at the HTTP server (issue 48)', function () {
  this.timeout(30_000);
  let svc: TestSvc;
  before(async () => {
    svc = await startSvc({ config: CONFIG });
  });
  after(async () => {
    await svc.close();
  });

  it('refuses the connection past the per-address cap with a 503 in the wire shape, while another address is served', async () => {
    const held = [await connect(svc), await connect(svc)];
    // Each served a request: the server has counted both.
    for (const raw of held) {
      raw.socket.write(get('/healthz'));
      await raw.received(/HTTP\/1\.1 200/);
    }
    const before = await metric(svc, 'svc_http_connections_refused_total{limit="address"}');

    const openai = await connect(svc);
    openai.socket.write(post('/v1/openai/chat/completions', '{"model":"svc-pro","messages":[]}'));
    const answer = await openai.closed;
    assert.match(answer, /^HTTP\/1\.1 503 /);
    assert.match(answer, /retry-after: 1/i);
    assert.match(answer, /"code":"service_unavailable"/);

    const anthropic = await connect(svc);
    anthropic.socket.write(post('/v1/anthropic/v1/messages', '{}'));
    const overloaded = await anthropic.closed;
    assert.match(overloaded, /^HTTP\/1\.1 529 /);
    assert.match(overloaded, /"type":"overloaded_error"/);

    const gemini = await connect(svc);
    gemini.socket.write(post('/v1/gemini/v1beta/models/svc-pro:generateContent', '{}'));
    assert.match(await gemini.closed, /"status":"UNAVAILABLE"/);

    // Another address is served meanwhile (127.0.0.2 is loopback too on Linux).
    assert.equal(await healthz(svc, '127.0.0.2'), 200);
    assert.equal(await metric(svc, 'svc_http_connections_refused_total{limit="address"}'), before + 3);

    // A held connection that closes frees its place for the same address.
    const [first] = held;
    first?.socket.end();
    await first?.closed;
    const again = await connect(svc);
    again.socket.write(get('/healthz'));
    await again.received(/HTTP\/1\.1 200/);
    for (const raw of [...held, again]) raw.socket.destroy();
  });

  it('cuts a request head that trickles', async () => {
    const raw = await connect(svc, '127.0.0.3');
    raw.socket.write('GET /healthz HTTP/1.1\r\nhost: svc\r\n');
    // One header byte at a time, never finishing the head (the attack of the issue).
    const trickle = setInterval(() => {
      if (!raw.socket.destroyed) raw.socket.write('x');
    }, 100);
    try {
      const answer = await raw.closed;
      assert.ok(!/HTTP\/1\.1 200/.test(answer), 'the head was never served');
    } finally {
      clearInterval(trickle);
    }
  });

  it('cuts a request body that stops arriving', async () => {
    const raw = await connect(svc, '127.0.0.4');
    raw.socket.write(
      'POST /v1/openai/chat/completions HTTP/1.1\r\nhost: svc\r\ncontent-type: application/json\r\ncontent-length: 500\r\nauthorization: Bearer svc_sk_x\r\n\r\n{"model":',
    );
    const answer = await raw.closed;
    assert.ok(!/HTTP\/1\.1 200/.test(answer));
  });

  it('cuts a request body that trickles without ever pausing long', async () => {
    const raw = await connect(svc, '127.0.0.5');
    raw.socket.write(
      'POST /v1/openai/chat/completions HTTP/1.1\r\nhost: svc\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{',
    );
    const trickle = setInterval(() => {
      if (!raw.socket.destroyed) raw.socket.write(' ');
    }, 200);
    try {
      const answer = await raw.closed;
      assert.ok(!/HTTP\/1\.1 200/.test(answer));
    } finally {
      clearInterval(trickle);
    }
  });
});

describe('running out of file descriptors toward an upstream (issue 48)', function () {
  this.timeout(30_000);
  let svc: TestSvc;
  // Every connection to the upstream fails as a process out of descriptors fails it.
  const exhausted = new Agent({
    connect: (_options, callback) =>
      callback(
        Object.assign(new Error('connect EMFILE 127.0.0.1:9 - Local (undefined:undefined)'), { code: 'EMFILE' }),
        null,
      ),
  });
  before(async () => {
    svc = await startSvc({
      dispatcher: exhausted,
      config: `models:
  remote:
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    provider: openai
    base_url: http://127.0.0.1:9/v1
    api_key: key-remote-0123456789
    upstream_model: m
`,
    });
  });
  after(async () => {
    await svc.close();
    await exhausted.close();
  });

  it("is svc's own 503 with a retry hint, counted as such, never 502 upstream_error; nothing charged", async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const res = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'remote', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }),
    });
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'service_unavailable');
    const text = await svc.core.metrics.registry.render();
    assert.match(
      text,
      /svc_upstream_attempts_total\{upstream="remote#1:openai@127\.0\.0\.1:9",outcome="unavailable"\} 1/,
    );
    assert.doesNotMatch(text, /outcome="upstream_error"/);
    const wallet = await svc.wallet(accountId);
    assert.deepEqual([wallet.balance, wallet.held], [1_000_000n, 0n]);
  });
});
