import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { Agent, fetch as undiciFetch } from 'undici';
import { oauthDb } from '../../core/oauth/tables';
import { consoleClient, createConsoleUser, type ConsoleUser } from '../console/helpers';
import { startSvc, type TestSvc } from '../helpers/harness';

// Issue 31 through the real gateway: SSRF by a Client ID Metadata Document at a name that
// resolves inward (finding 1-2), registration floods (finding 4) and the open redirect (finding 6).

const REDIRECT = 'http://127.0.0.1:9/cb';

function challenge(): string {
  return createHash('sha256').update(randomBytes(32).toString('base64url')).digest('base64url');
}

/** Registers a client from `localAddress` (any 127.x.y.z is this machine's loopback). */
async function registerFrom(svc: TestSvc, agent: Agent, body: unknown = {}): Promise<number> {
  const res = await undiciFetch(`${svc.baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Flood', redirect_uris: [REDIRECT], ...(body as object) }),
    dispatcher: agent,
  });
  await res.arrayBuffer();
  return res.status;
}

describe('OAuth, security round two (issue 31)', function () {
  this.timeout(120_000);

  describe('a metadata document at a name that resolves to an internal address', () => {
    let svc: TestSvc;
    let user: ConsoleUser;
    let internal: net.Server;
    let connections = 0;

    before(async () => {
      internal = net.createServer((socket) => {
        connections += 1;
        socket.on('error', () => undefined);
        socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 20\r\n\r\ndb_password=hunter2\n');
      });
      await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
      svc = await startSvc({
        // An /etc/hosts-style table: this public-looking name points at the loopback listener.
        oauthDocumentFetch: {
          resolve: async (name) => {
            if (name === 'clients.example.com') return [{ address: '127.0.0.1', family: 4 }];
            throw new Error(`ENOTFOUND ${name}`);
          },
          timeoutMs: 500,
        },
      });
      user = await createConsoleUser(svc, {
        name: 'Ssrf Owner',
        email: 'ssrf@oauth.example',
        balance: 1000n,
        keyName: 'k',
      });
    });
    after(async () => {
      await svc?.close();
      await new Promise<void>((resolve) => internal.close(() => resolve()));
    });

    it('is never connected to; the page says only that the document could not be fetched', async () => {
      const port = (internal.address() as AddressInfo).port;
      const browser = consoleClient(svc.baseUrl);
      await browser.signIn(user.email, user.password);
      const query = new URLSearchParams({
        client_id: `https://clients.example.com:${port}/client.json`,
        redirect_uri: REDIRECT,
        response_type: 'code',
        code_challenge: challenge(),
        code_challenge_method: 'S256',
      });
      const page = await browser.get(`/authorize?${query.toString()}`);
      assert.equal(page.status, 400);
      assert.equal(page.headers.get('location'), null);
      assert.match(page.body, /The client(&#39;|&#x27;|’|')s metadata document could not be fetched\./);
      assert.doesNotMatch(page.body, /db_passw|HTTP \d|fetch failed|valid JSON|Unexpected token|timeout/i);
      assert.equal(connections, 0);
    });
  });

  describe('dynamic client registration', () => {
    let svc: TestSvc;
    let offset = 0;
    const agents: Agent[] = [];
    const from = (address: string): Agent => {
      const agent = new Agent({ localAddress: address, connections: 100 });
      agents.push(agent);
      return agent;
    };

    before(async () => {
      svc = await startSvc({ now: () => Date.now() + offset });
    });
    after(async () => {
      await Promise.all(agents.map((a) => a.close()));
      await svc?.close();
    });

    it('a flood of 70 from one address cannot keep another address from registering', async () => {
      const flooder = from('127.0.0.2');
      const flood = await Promise.all(Array.from({ length: 70 }, () => registerFrom(svc, flooder)));
      const accepted = flood.filter((s) => s === 201).length;
      assert.equal(accepted, 20, 'the per-address limit (20 an hour)');
      assert.equal(flood.filter((s) => s === 429).length, 50);
      // The refusals spent nothing of the global budget: someone else still registers.
      assert.equal(await registerFrom(svc, from('127.0.0.3')), 201);
      // And the flooder is told when to come back.
      const again = await undiciFetch(`${svc.baseUrl}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: [REDIRECT] }),
        dispatcher: flooder,
      });
      assert.equal(again.status, 429);
      assert.equal(((await again.json()) as { error: string }).error, 'slow_down');
      assert.ok(Number(again.headers.get('retry-after')) > 0);
    });

    it('a registration body above 8 KiB is 413', async () => {
      const status = await registerFrom(svc, from('127.0.0.4'), { client_name: 'x'.repeat(9 * 1024) });
      assert.equal(status, 413);
    });

    it('clients with no grant a day after registering are swept; a client with a grant stays', async () => {
      const db = oauthDb(svc.store);
      const register = async (address: string): Promise<string> => {
        const res = await undiciFetch(`${svc.baseUrl}/oauth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ redirect_uris: [REDIRECT] }),
          dispatcher: from(address),
        });
        assert.equal(res.status, 201);
        return ((await res.json()) as { client_id: string }).client_id;
      };
      const unused = await register('127.0.0.5');
      const used = await register('127.0.0.6');
      await db
        .insertInto('oauth_grants')
        .values({
          id: 'oag_sweeptest',
          account_id: 'acct_none',
          client_id: used,
          scope: 'tools',
          created_at: BigInt(Date.now()),
          last_used_at: null,
          revoked_at: null,
        })
        .execute();
      offset = 86_400_000 + 120_000;
      await register('127.0.0.7');
      const left = (await db.selectFrom('oauth_clients').select('client_id').execute()).map((r) => r.client_id);
      assert.ok(!left.includes(unused), 'the unused client is gone');
      assert.ok(left.includes(used), 'the client with a grant stays');
    });
  });

  describe('the authorization endpoint redirects only after the person answered (RFC 9700 §4.11.2)', () => {
    let svc: TestSvc;
    let user: ConsoleUser;
    let clientId = '';

    before(async () => {
      svc = await startSvc();
      user = await createConsoleUser(svc, {
        name: 'Redirect Owner',
        email: 'redirect@oauth.example',
        balance: 1000n,
        keyName: 'k',
      });
      const res = await fetch(`${svc.baseUrl}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'Landing', redirect_uris: ['https://evil.example/landing'] }),
      });
      clientId = ((await res.json()) as { client_id: string }).client_id;
    });
    after(async () => svc?.close());

    async function authorize(extra: Record<string, string>) {
      const browser = consoleClient(svc.baseUrl);
      await browser.signIn(user.email, user.password);
      const query = new URLSearchParams({
        client_id: clientId,
        redirect_uri: 'https://evil.example/landing',
        state: 's',
        ...extra,
      });
      return browser.get(`/authorize?${query.toString()}`);
    }

    it('response_type=token, no code_challenge, a foreign resource: an error page on svc', async () => {
      const cases: Record<string, string>[] = [
        { response_type: 'token' },
        { response_type: 'code' },
        { response_type: 'code', code_challenge: challenge(), code_challenge_method: 'plain' },
        {
          response_type: 'code',
          code_challenge: challenge(),
          code_challenge_method: 'S256',
          resource: 'https://evil.example/mcp',
        },
        { response_type: 'code', code_challenge: challenge(), code_challenge_method: 'S256', scope: 'admin' },
      ];
      for (const extra of cases) {
        const page = await authorize(extra);
        assert.equal(page.status, 400, JSON.stringify(extra));
        assert.equal(page.headers.get('location'), null, JSON.stringify(extra));
        assert.doesNotMatch(page.body, /evil\.example\/landing\?/);
      }
    });

    it('a first, well-formed authorization shows the consent page, not a redirect', async () => {
      const page = await authorize({
        response_type: 'code',
        code_challenge: challenge(),
        code_challenge_method: 'S256',
      });
      assert.equal(page.status, 200);
      assert.equal(page.headers.get('location'), null);
      assert.match(page.body, /name="decision" value="allow"/);
    });

    it('an allowed consent whose form was altered to another resource issues no code', async () => {
      const browser = consoleClient(svc.baseUrl);
      await browser.signIn(user.email, user.password);
      const query = new URLSearchParams({
        client_id: clientId,
        redirect_uri: 'https://evil.example/landing',
        response_type: 'code',
        code_challenge: challenge(),
        code_challenge_method: 'S256',
      });
      const page = await browser.get(`/authorize?${query.toString()}`);
      const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      const answer = await browser.post('/authorize', {
        ...Object.fromEntries(query),
        resource: 'https://evil.example/mcp',
        csrf_token: csrf,
        decision: 'allow',
      });
      assert.equal(answer.status, 400);
      assert.equal(answer.headers.get('location'), null);
    });
  });
});
