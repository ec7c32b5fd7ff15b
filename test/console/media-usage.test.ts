import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';
import { sandboxWav } from '../../core/providers/media/sandbox';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleUser } from './helpers';

/*
 * The console's usage page for media calls (SPEC §14): each record says what it was billed by, in
 * the viewer's words — images, characters, audio minutes, searches — beside its cost.
 */

describe('console: media calls on the usage page', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let user: ConsoleUser;

  before(async () => {
    svc = await startSvc();
    user = await createConsoleUser(svc, {
      name: 'Media',
      email: 'media-usage@example.com',
      balance: 100_000n,
      keyName: 'media',
    });
  });
  after(async () => {
    await svc.close();
  });

  it('shows images, characters, audio minutes and searches, in English and in Persian', async () => {
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: user.key, maxRetries: 0 });
    await client.images.generate({ model: 'svc-image', prompt: 'two cats', n: 2, quality: 'low' });
    await (await client.audio.speech.create({ model: 'svc-tts', input: 'hello there', voice: 'alloy' })).arrayBuffer();
    // 90 s of audio: 1.5 minutes.
    await client.audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await toFile(sandboxWav(440, 90, 2000), 'a.wav', { type: 'audio/wav' }),
    });
    const rerank = await fetch(`${svc.baseUrl}/v1/openai/rerank`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-rerank', query: 'cats', documents: ['cats', 'dogs'] }),
    });
    assert.equal(rerank.status, 200);
    const c = consoleClient(svc.baseUrl);
    await c.signIn(user.email, user.password);
    const page = await c.get('/usage');
    assert.equal(page.status, 200);
    for (const words of ['2 images', '11 characters', '1.5 audio minutes', '1 search'])
      assert.ok(page.body.includes(words), `the usage page says ${words}`);
    const fa = consoleClient(svc.baseUrl, { 'accept-language': 'fa' });
    await fa.signIn(user.email, user.password);
    const persian = await fa.get('/usage');
    assert.ok(persian.body.includes('۲ تصویر'), 'images in Persian');
    assert.ok(persian.body.includes('دقیقه صدا'), 'audio minutes in Persian');
  });
});
