import assert from 'node:assert/strict';
import { isInIran } from '../../core/tools/geo';
import { startSvc, type TestSvc } from '../helpers/harness';
import { post, toolCall } from './helpers';

// Cities on both sides of Iran's borders (and of the Persian Gulf), where a bounding box errs.
const INSIDE: Record<string, [number, number]> = {
  Tehran: [35.6892, 51.389],
  'Bandar Abbas': [27.1832, 56.2666],
  Tabriz: [38.0962, 46.2738],
  Zahedan: [29.4963, 60.8629],
  Mashhad: [36.2605, 59.6168],
  Abadan: [30.3473, 48.2934],
  Khorramshahr: [30.4397, 48.1664],
  Chabahar: [25.2919, 60.643],
  Qeshm: [26.9581, 56.2719],
  Kish: [26.5578, 53.9817],
  'Hormuz island': [27.06, 56.46],
  Bushehr: [28.9234, 50.8203],
  Astara: [38.42, 48.87],
  Maku: [39.2953, 44.4925],
  Sarakhs: [36.54, 61.16],
  Zabol: [31.0287, 61.5012],
  'Qasr-e Shirin': [34.5159, 45.5794],
  Bajgiran: [37.6, 58.42],
  Parsabad: [39.6482, 47.9174],
  Jask: [25.64, 57.77],
};
const OUTSIDE: Record<string, [number, number]> = {
  Dubai: [25.2048, 55.2708],
  Baghdad: [33.3152, 44.3661],
  'Kuwait City': [29.3759, 47.9774],
  Doha: [25.2854, 51.531],
  Ashgabat: [37.9601, 58.3261],
  Herat: [34.3529, 62.204],
  Basra: [30.5085, 47.7804],
  Sulaymaniyah: [35.5613, 45.4375],
  'Ras al-Khaimah': [25.7895, 55.9432],
  Khasab: [26.18, 56.25],
  Manama: [26.2285, 50.586],
  Gwadar: [25.1216, 62.3254],
  Lankaran: [38.75, 48.85],
  Nakhchivan: [39.2, 45.41],
  Zaranj: [30.96, 61.86],
};

describe("maps_search_places: the search point must lie within Iran's borders", () => {
  for (const [city, [lat, lon]] of Object.entries(INSIDE)) {
    it(`${city} is inside`, () => assert.equal(isInIran(lat, lon), true));
  }
  for (const [city, [lat, lon]] of Object.entries(OUTSIDE)) {
    it(`${city} is outside`, () => assert.equal(isInIran(lat, lon), false));
  }

  describe('through the MCP endpoint', () => {
    let svc: TestSvc;
    let key: string;
    let accountId: string;
    before(async () => {
      svc = await startSvc();
      ({ key, accountId } = await svc.createFundedKey(100_000));
    });
    after(async () => {
      await svc?.close();
    });

    for (const city of ['Dubai', 'Baghdad', 'Kuwait City', 'Doha', 'Ashgabat', 'Herat']) {
      it(`a search around ${city} is refused as a tool error and costs nothing`, async () => {
        const [latitude, longitude] = OUTSIDE[city] as [number, number];
        const before = await svc.wallet(accountId);
        const reply = await post(svc.baseUrl, toolCall('maps_search_places', { query: 'cafe', latitude, longitude }), {
          authorization: `Bearer ${key}`,
        });
        const result = reply.message?.['result'] as { isError: boolean; content: Array<{ text: string }> };
        assert.equal(result.isError, true, reply.text);
        assert.match(result.content[0]?.text ?? '', /inside Iran/);
        assert.deepEqual(await svc.wallet(accountId), before);
      });
    }

    it('a search around Bandar Abbas is served and charged', async () => {
      const [latitude, longitude] = INSIDE['Bandar Abbas'] as [number, number];
      const reply = await post(
        svc.baseUrl,
        toolCall('maps_search_places', { query: 'داروخانه', latitude, longitude }),
        { authorization: `Bearer ${key}` },
      );
      const result = reply.message?.['result'] as { isError: boolean };
      assert.equal(result.isError, false, reply.text);
    });
  });
});
