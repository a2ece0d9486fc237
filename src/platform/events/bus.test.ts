import { describe, expect, it } from 'vitest';
import { NOTICE_PAYLOAD_BYTES, NOTICES_PER_PAYLOAD, noticePayloads, type LiveNotice } from './bus.ts';

const delivery = (i: number): LiveNotice => ({
  kind: 'delivery', id: `dlv_01m811ttm2wdjhphbar0j${String(i).padStart(5, '0')}`, organizationId: 'org_01m811ttm2wdjhphbar0j1gk3g',
  mode: 'test', endpointId: 'wh_01m811ttm2wdjhphbar0j1gk3g', status: 'cancelled',
});

describe('noticePayloads', () => {
  it('packs notices in order into JSON arrays below the NOTIFY payload limit', () => {
    const notices = Array.from({ length: 1000 }, (_, i) => delivery(i));
    const payloads = noticePayloads(notices);
    expect(payloads.length).toBeGreaterThan(1);
    for (const p of payloads) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(NOTICE_PAYLOAD_BYTES);
    expect(payloads.flatMap((p) => JSON.parse(p) as LiveNotice[])).toEqual(notices);
    expect(noticePayloads([])).toEqual([]);
  });

  it('leaves room for the batches SQL packs (json_agg of NOTICES_PER_PAYLOAD notices, with its spacing)', () => {
    // json_build_object spells each key as `"key" : value`, json_agg separates with `, \n `.
    const sqlSpelled = Array.from({ length: NOTICES_PER_PAYLOAD }, (_, i) =>
      JSON.stringify(delivery(i)).replaceAll('":', '" : ').replaceAll(',"', ', "')).join(', \n ');
    expect(Buffer.byteLength(`[${sqlSpelled}]`)).toBeLessThan(8000);
  });
});
