import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { createChannel, createClientFactory, Metadata, Status, type Channel } from 'nice-grpc';
import { AccountServiceDefinition } from '../../gen/svc/core/v1/accounts';
import { AuthServiceDefinition } from '../../gen/svc/core/v1/auth';
import { ChatServiceDefinition } from '../../gen/svc/core/v1/chat';
import { ConsoleServiceDefinition } from '../../gen/svc/core/v1/console';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { ModelServiceDefinition } from '../../gen/svc/core/v1/models';
import { ToolServiceDefinition } from '../../gen/svc/core/v1/tools';
import { UsageServiceDefinition } from '../../gen/svc/core/v1/usage';
import { WalletServiceDefinition } from '../../gen/svc/core/v1/wallet';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { fuzzParams, walletSnapshot } from './fuzz-kit';

interface MessageType {
  fromPartial(value: object): unknown;
  encode(value: never): { finish(): Uint8Array };
}
interface MethodDef {
  readonly name: string;
  readonly requestType: MessageType;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
}
interface ServiceDef {
  readonly fullName: string;
  readonly methods: Record<string, MethodDef>;
}

const SERVICES = [
  AccountServiceDefinition,
  AuthServiceDefinition,
  ChatServiceDefinition,
  ConsoleServiceDefinition,
  KeyServiceDefinition,
  ModelServiceDefinition,
  ToolServiceDefinition,
  UsageServiceDefinition,
  WalletServiceDefinition,
] as unknown as ServiceDef[];

interface Rpc {
  readonly path: string;
  readonly method: MethodDef;
}
const RPCS: Rpc[] = SERVICES.flatMap((s) =>
  Object.values(s.methods).map((m) => ({ path: `/${s.fullName}/${m.name}`, method: m })),
);

/** Statuses the core declares (SPEC §9); INTERNAL and UNKNOWN are never a fine answer to bad input. */
const DECLARED = new Set([
  Status.OK,
  Status.INVALID_ARGUMENT,
  Status.NOT_FOUND,
  Status.UNAUTHENTICATED,
  Status.PERMISSION_DENIED,
  Status.FAILED_PRECONDITION,
  Status.ALREADY_EXISTS,
  Status.RESOURCE_EXHAUSTED,
]);

const identity = (b: Buffer): Buffer => b;

/** Bytes on the wire: a real protobuf field layout with wrong wire types, lengths past the end, junk. */
const rawMessage: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
  fc
    .array(
      fc.record({
        field: fc.integer({ min: 1, max: 12 }),
        wire: fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 7),
        payload: fc.uint8Array({ maxLength: 24 }),
      }),
      { maxLength: 6 },
    )
    .map((fields) =>
      Buffer.concat(
        fields.map(({ field, wire, payload }) =>
          Buffer.concat([
            Buffer.from([(field << 3) | wire]),
            wire === 2 ? Buffer.from([payload.length + (payload.length % 3)]) : Buffer.alloc(0),
            Buffer.from(payload),
          ]),
        ),
      ),
    ),
  // A length-delimited field that claims far more bytes than follow.
  fc.integer({ min: 1, max: 12 }).map((field) => Buffer.from([(field << 3) | 2, 0xff, 0xff, 0xff, 0x0f, 0x41])),
);

/** Odd but well-typed values for every scalar field a request has. */
function oddValue(sample: unknown): fc.Arbitrary<unknown> | undefined {
  switch (typeof sample) {
    case 'string':
      return fc.oneof(
        fc.constantFrom(
          '',
          ' ',
          '../../etc/passwd',
          'acc_',
          'key_',
          'svc_sk_',
          '\u0000',
          'http://169.254.169.254/',
          "'; DROP TABLE accounts; --",
        ),
        fc.string({ maxLength: 40 }),
        fc.string({ unit: 'grapheme', maxLength: 20 }),
        fc.integer({ min: 10_000, max: 300_000 }).map((n) => 'a'.repeat(n)),
      );
    case 'number':
      return fc.oneof(
        fc.constantFrom(0, -1, 2_147_483_647, -2_147_483_648),
        fc.integer({ min: -2_147_483_648, max: 2_147_483_647 }),
      );
    case 'bigint':
      return fc.oneof(
        fc.constantFrom(0n, -1n, 9_223_372_036_854_775_807n, -9_223_372_036_854_775_808n),
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      );
    case 'boolean':
      return fc.boolean();
    default:
      return undefined;
  }
}

function oddRequest(type: MessageType): fc.Arbitrary<Buffer> {
  const base = type.fromPartial({}) as Record<string, unknown>;
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, sample] of Object.entries(base)) {
    const arb = oddValue(sample);
    if (arb !== undefined) fields[name] = arb;
  }
  return fc
    .record(fields, { requiredKeys: [] })
    .map((partial) => Buffer.from(type.encode(type.fromPartial(partial) as never).finish()));
}

describe('fuzz: gRPC core services', function () {
  this.timeout(300_000);
  let svc: TestSvc;
  let funded: FundedKey;
  let raw: grpc.Client;
  let channel: Channel;

  before(async () => {
    svc = await startSvc();
    funded = await svc.createFundedKey(10_000_000n, 'fuzz-grpc');
    raw = new grpc.Client(svc.coreAddress, grpc.credentials.createInsecure());
    channel = createChannel(svc.coreAddress);
  });
  after(async () => {
    raw?.close();
    channel?.close();
    await svc?.close();
  });

  const callers = (): Record<string, string | undefined> => ({
    key: `Bearer ${funded.key}`,
    admin: `Bearer ${svc.adminToken}`,
    none: undefined,
    bogus: 'Bearer svc_sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
  });

  /** One call with raw request bytes; resolves to its status and details (never throws). */
  function rawCall(
    rpc: Rpc,
    body: Buffer,
    authorization: string | undefined,
  ): Promise<{ code: number; details: string }> {
    const metadata = new grpc.Metadata();
    if (authorization !== undefined) metadata.set('authorization', authorization);
    const deadline = Date.now() + 30_000;
    return new Promise((resolve) => {
      if (rpc.method.responseStream) {
        const stream = raw.makeServerStreamRequest(rpc.path, identity, identity, body, metadata, { deadline });
        stream.on('data', () => undefined);
        stream.on('error', (e: grpc.ServiceError) => resolve({ code: e.code, details: e.details }));
        stream.on('status', (s: grpc.StatusObject) => {
          if (s.code === Status.OK) resolve({ code: s.code, details: s.details });
        });
      } else {
        raw.makeUnaryRequest(rpc.path, identity, identity, body, metadata, { deadline }, (e) =>
          resolve(e === null ? { code: Status.OK, details: '' } : { code: e.code ?? -1, details: e.details ?? '' }),
        );
      }
    });
  }

  it(`raw bytes to every RPC (${RPCS.length}) with every kind of caller: declared statuses, the core keeps serving, no charge`, async () => {
    const before = await walletSnapshot(svc, funded.accountId);
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...RPCS),
        rawMessage,
        fc.constantFrom('key', 'admin', 'none', 'bogus'),
        async (rpc, body, who) => {
          const { code, details } = await rawCall(rpc, body, callers()[who]);
          seen.set(code, (seen.get(code) ?? 0) + 1);
          // gRPC's own rule (statuscodes.md: "error parsing request proto" is INTERNAL), raised by
          // grpc-js before any core code runs; nothing else may be INTERNAL.
          if (code === Status.INTERNAL) {
            assert.equal(details, 'Error deserializing request', `${rpc.path}: INTERNAL ${details}`);
            return;
          }
          assert.ok(DECLARED.has(code), `${rpc.path} as ${who}: status ${code} ${details}`);
        },
      ),
      fuzzParams(300),
    );
    assert.equal(await walletSnapshot(svc, funded.accountId), before);
    // Still serving, and undecodable bytes were not the only thing tried.
    const health = await rawCall(
      RPCS.find((r) => r.path.endsWith('/GetWallet')) as Rpc,
      Buffer.alloc(0),
      callers()['key'],
    );
    assert.equal(health.code, Status.OK);
    assert.ok(
      (seen.get(Status.INVALID_ARGUMENT) ?? 0) + (seen.get(Status.OK) ?? 0) + (seen.get(Status.NOT_FOUND) ?? 0) > 0,
    );
  });

  it('well-formed requests with odd values in every field (empty, huge, control characters, int64 extremes): never INTERNAL', async () => {
    const okCalls = new Map<string, number>();
    const arbs = RPCS.map((rpc) =>
      oddRequest(rpc.method.requestType).map((body) => ({
        rpc,
        body,
        [fc.toStringMethod]: () => `${rpc.path} ${body.subarray(0, 200).toString('hex')} (${body.length} bytes)`,
      })),
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(...arbs), fc.constantFrom('key', 'bogus'), async ({ rpc, body }, who) => {
        const { code, details } = await rawCall(rpc, body, callers()[who]);
        assert.ok(DECLARED.has(code), `${rpc.path} as ${who}: status ${code} ${details}`);
        if (code === Status.OK) okCalls.set(rpc.method.name, (okCalls.get(rpc.method.name) ?? 0) + 1);
      }),
      fuzzParams(300),
    );
    // The wallet moves only through calls that succeeded (a key's chats and tool calls; Hold and
    // Settle are admin only), and the books still balance.
    const ok = (name: string): number => okCalls.get(name) ?? 0;
    const wallet = await svc.wallet(funded.accountId);
    const entries = await svc.ledger(funded.accountId, 1000);
    assert.equal(
      wallet.balance,
      entries.reduce((sum, e) => sum + e.amount, 0n),
      'balance == sum(ledger)',
    );
    assert.ok(wallet.balance - wallet.held >= 0n, 'balance - held >= 0');
    const charges = entries.filter((e) => e.amount < 0n).length;
    assert.ok(
      charges <= ok('Settle') + ok('CreateChatCompletion') + ok('CallTool'),
      `${charges} charges, ${JSON.stringify([...okCalls])}`,
    );
    if (wallet.held > 0n) assert.ok(ok('Hold') > 0, 'a hold only from a successful Hold');
  });

  it('odd metadata (authorization, x-request-id, idempotency-key): declared statuses only', async () => {
    const client = createClientFactory().create(WalletServiceDefinition, channel);
    const printable = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      maxLength: 300,
    });
    await fc.assert(
      fc.asyncProperty(printable, printable, printable, async (authorization, requestId, idem) => {
        const metadata = new Metadata({ authorization, 'x-request-id': requestId, 'idempotency-key': idem });
        const code = await client.getWallet({}, { metadata }).then(
          () => Status.OK,
          (e: { code?: number }) => e.code ?? -1,
        );
        assert.ok(
          code === Status.UNAUTHENTICATED || code === Status.INVALID_ARGUMENT,
          `status ${code} for ${authorization}`,
        );
      }),
      fuzzParams(100),
    );
  });
});
