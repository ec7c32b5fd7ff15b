import assert from 'node:assert/strict';
import {
  anthropicWithoutBillingHeader,
  derivedCacheKey,
  geminiWithoutBillingHeader,
  responsesWithoutBillingHeader,
  withoutBillingHeader,
} from '../../core/chat/cache';
import { withBreakpoints } from '../../core/providers/llm/anthropic/request';
import { narrowedToAllowed } from '../../core/providers/llm/translate';
import type { WireChatRequest } from '../../core/providers/llm/types';

/* The request side of SPEC §13 piece by piece (test/providers/caching.test.ts runs it end to end). */

const HEADER = 'x-anthropic-billing-header: cc_version=2.1.332.e4f; cc_entrypoint=cli; cch=9a1b2;';

describe('cache routing (SPEC §13)', () => {
  it('removes the billing header from the neutral form: a joined block, a first line, a part, a whole message', () => {
    const other = { role: 'user' as const, content: HEADER };
    const out = withoutBillingHeader([
      { role: 'system', content: `${HEADER}\n\nYou are Claude Code.` },
      { role: 'developer', content: `${HEADER}\nBe brief.` },
      {
        role: 'system',
        content: [
          { type: 'text', text: HEADER },
          { type: 'text', text: 'Rules.' },
        ],
      },
      { role: 'system', content: HEADER },
      other,
    ]);
    assert.deepEqual(out, [
      { role: 'system', content: 'You are Claude Code.' },
      { role: 'developer', content: 'Be brief.' },
      { role: 'system', content: [{ type: 'text', text: 'Rules.' }] },
      other,
    ]);
    const clean = [{ role: 'system' as const, content: 'x-anthropic-billing is not the header' }];
    assert.equal(withoutBillingHeader(clean), clean, 'nothing to remove: the same array');
  });

  it('removes the billing block from an Anthropic body, the rest byte for byte', () => {
    const rest = { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral', ttl: '1h' } };
    const body = { model: 'm', system: [{ type: 'text', text: HEADER }, rest], messages: [] };
    assert.deepEqual(anthropicWithoutBillingHeader(body), { model: 'm', system: [rest], messages: [] });
    assert.deepEqual(anthropicWithoutBillingHeader({ system: `${HEADER}\nHi.` }), { system: 'Hi.' });
    assert.deepEqual(anthropicWithoutBillingHeader({ system: [{ type: 'text', text: HEADER }], x: 1 }), { x: 1 });
    const untouched = { system: [rest] };
    assert.equal(anthropicWithoutBillingHeader(untouched), untouched);
    assert.deepEqual(responsesWithoutBillingHeader({ instructions: `${HEADER}\nGo.` }), { instructions: 'Go.' });
    assert.deepEqual(
      geminiWithoutBillingHeader({
        systemInstruction: { parts: [{ text: HEADER }, { text: 'Rules.' }] },
        contents: [],
      }),
      { systemInstruction: { parts: [{ text: 'Rules.' }] }, contents: [] },
    );
  });

  it('derives a cache key from the account (and the session), never the same for two accounts', () => {
    const account = { key: 'account', breakpoints: 'auto' } as const;
    const session = { key: 'session', breakpoints: 'auto' } as const;
    const a = derivedCacheKey(account, 'acc_A', 's1');
    assert.match(a ?? '', /^svc-[A-Za-z0-9_-]{32}$/);
    assert.equal(derivedCacheKey(account, 'acc_A', 's2'), a, 'account: the session does not matter');
    assert.notEqual(derivedCacheKey(account, 'acc_B', 's1'), a);
    assert.notEqual(derivedCacheKey(session, 'acc_A', 's1'), derivedCacheKey(session, 'acc_A', 's2'));
    assert.equal(derivedCacheKey(session, 'acc_A', undefined), a, 'no session id: the account key');
    assert.equal(derivedCacheKey({ key: 'off', breakpoints: 'auto' }, 'acc_A', 's1'), undefined);
    assert.ok(!(a ?? '').includes('acc_A'));
  });

  it('puts at most four breakpoints: last tool, last system block, the last block of the last two user turns', () => {
    const text = (t: string) => ({ type: 'text', text: t });
    const marked = withBreakpoints({
      tools: [{ name: 'a' }, { name: 'b' }],
      system: [text('s1'), text('s2')],
      messages: [
        { role: 'user', content: [text('u1')] },
        { role: 'assistant', content: [text('a1')] },
        { role: 'user', content: [text('u2'), text('u2b')] },
        { role: 'assistant', content: [text('a2')] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'r' }] },
      ],
    });
    const json = JSON.stringify(marked);
    assert.equal(json.split('cache_control').length - 1, 4);
    const eph = { type: 'ephemeral' };
    assert.deepEqual((marked['tools'] as unknown[])[1], { name: 'b', cache_control: eph });
    assert.deepEqual((marked['system'] as unknown[])[1], { ...text('s2'), cache_control: eph });
    const messages = marked['messages'] as { content: Record<string, unknown>[] }[];
    assert.equal(messages[0]?.content[0]?.['cache_control'], undefined);
    assert.deepEqual(messages[2]?.content[1]?.['cache_control'], eph);
    assert.deepEqual(messages[4]?.content[0]?.['cache_control'], eph);
  });

  it('narrows the tools to allowed_tools only for upstreams without it', () => {
    const fn = (name: string) => ({ type: 'function' as const, function: { name } });
    const request: WireChatRequest = {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [fn('a'), fn('b')],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'b' } }] },
      },
    };
    const narrowed = narrowedToAllowed(request);
    assert.deepEqual(narrowed.tools, [fn('b')]);
    assert.equal(narrowed.tool_choice, 'required');
    const plain = { ...request, tool_choice: 'auto' };
    assert.equal(narrowedToAllowed(plain), plain);
  });
});
