import assert from 'node:assert/strict';
import { ClientError, createChannel, createClient, Metadata, Status } from 'nice-grpc';
import { ModelServiceDefinition } from '../../gen/svc/core/v1/models';
import { ToolServiceDefinition } from '../../gen/svc/core/v1/tools';
import { startSvc, type TestSvc } from '../helpers/harness';

describe('rate limit and key scope', function () {
  let svc: TestSvc;
  before(async function () {
    svc = await startSvc({ config: 'limits:\n  requests_per_minute: 2\n' });
  });
  after(async function () {
    await svc.close();
  });

  it('spends no rate-limit token on a call refused for scope', async function () {
    const account = await svc.core.accounts.create('scoped');
    const { secret } = await svc.core.keys.create({ accountId: account.id, name: 'chat only', scope: 'chat' });
    const channel = createChannel(svc.coreAddress);
    const metadata = new Metadata({ authorization: `Bearer ${secret}` });
    try {
      const tools = createClient(ToolServiceDefinition, channel);
      for (let i = 0; i < 3; i++) {
        await assert.rejects(
          tools.listTools({}, { metadata }),
          (e: unknown) => e instanceof ClientError && e.code === Status.PERMISSION_DENIED,
        );
      }
      const models = createClient(ModelServiceDefinition, channel);
      await models.listModels({}, { metadata });
      await models.listModels({}, { metadata });
      await assert.rejects(
        models.listModels({}, { metadata }),
        (e: unknown) => e instanceof ClientError && e.code === Status.RESOURCE_EXHAUSTED,
      );
    } finally {
      channel.close();
    }
  });
});
