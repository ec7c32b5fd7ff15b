import assert from 'node:assert/strict';
import { billedSeconds, codePoints, imagePrices, ratedCost, searchesOf } from '../../core/media/pricing';
import { renderTranscription } from '../../core/media/transcript';
import { SvcError } from '../../core/errors';

/* The price forms of SPEC §14 in integer credits, and the transcript formats svc renders. */

describe('media pricing (SPEC §14)', () => {
  const model = { id: 'pic' };
  const prices = new Map([
    ['1024x1024/low', 400n],
    ['1024x1024/high', 1700n],
    ['1536x1024/auto', 2500n],
    ['auto/medium', 900n],
  ]);

  it('matches size and quality: absent or auto matches every entry, an entry’s auto every request', () => {
    assert.deepEqual(imagePrices(model, prices, undefined, undefined), [400n, 1700n, 2500n, 900n]);
    assert.deepEqual(imagePrices(model, prices, '1024x1024', 'auto'), [400n, 1700n, 900n]);
    assert.deepEqual(imagePrices(model, prices, '1024x1024', 'high'), [1700n]);
    assert.deepEqual(imagePrices(model, prices, '1536x1024', 'low'), [2500n]);
    assert.deepEqual(imagePrices(model, prices, '1792x1024', 'medium'), [900n]);
  });

  it('refuses a size or quality the model does not price, naming it', () => {
    const named = (param: string) => (e: unknown) => e instanceof SvcError && e.param === param;
    assert.throws(() => imagePrices(model, new Map([['1024x1024/low', 1n]]), '512x512', undefined), named('size'));
    assert.throws(() => imagePrices(model, new Map([['1024x1024/low', 1n]]), '1024x1024', 'high'), named('quality'));
  });

  it('rounds every rate up to a whole credit, and counts what the SPEC counts', () => {
    assert.equal(ratedCost(1n, 1n, 1_000_000n), 1n);
    assert.equal(ratedCost(0n, 5n, 60n), 0n);
    assert.equal(ratedCost(61n, 60n, 60n), 61n);
    assert.equal(ratedCost(3n, 4200n, 60n), 210n);
    assert.equal(ratedCost(7n, 1000n, 60n), 117n);
    assert.equal(billedSeconds(2), 2n);
    assert.equal(billedSeconds(2.0001), 3n);
    assert.equal(billedSeconds(0.01), 1n);
    assert.equal(codePoints('a👋é'), 3);
    assert.equal(searchesOf(1), 1);
    assert.equal(searchesOf(100), 1);
    assert.equal(searchesOf(101), 2);
  });

  it('renders text, srt and vtt from segments, or one cue over the duration', () => {
    const verbose = {
      text: 'one two',
      duration: 3.5,
      segments: [
        { start: 0, end: 1.5, text: ' one' },
        { start: 1.5, end: 3.5, text: ' two' },
      ],
    };
    assert.equal(renderTranscription(verbose, 'text', undefined).body, 'one two\n');
    assert.equal(
      renderTranscription(verbose, 'srt', undefined).body,
      '1\n00:00:00,000 --> 00:00:01,500\none\n\n2\n00:00:01,500 --> 00:00:03,500\ntwo\n',
    );
    assert.equal(
      renderTranscription({ text: 'only' }, 'vtt', 3723.25).body,
      'WEBVTT\n\n00:00:00.000 --> 01:02:03.250\nonly\n',
    );
    assert.deepEqual(
      JSON.parse(renderTranscription({ text: 'x', usage: { type: 'duration', seconds: 2 } }, 'json', 2).body),
      {
        text: 'x',
        usage: { type: 'duration', seconds: 2 },
      },
    );
    assert.equal(renderTranscription(verbose, 'vtt', undefined).contentType, 'text/vtt; charset=utf-8');
  });
});
