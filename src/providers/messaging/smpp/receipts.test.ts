import { describe, expect, it } from 'vitest';
import { alternativeIds, deliverKind, parseReceiptText, readReceipt } from './receipts.ts';

describe('deliverKind', () => {
  it('tells receipts, acknowledgements and mobile-originated messages apart by esm_class', () => {
    expect(deliverKind(0x04)).toBe('receipt');
    expect(deliverKind(0x20)).toBe('receipt');
    expect(deliverKind(0x44)).toBe('receipt');
    expect(deliverKind(0x08)).toBe('ack');
    expect(deliverKind(0x10)).toBe('ack');
    expect(deliverKind(0x00)).toBe('mo');
    expect(deliverKind(0x40)).toBe('mo');
    expect(deliverKind(0x03)).toBe('mo');
  });
});

describe('parseReceiptText', () => {
  it('reads the Appendix B fields, with the dates and a text containing colons', () => {
    const fields = parseReceiptText('id:0123456789 sub:001 dlvrd:001 submit date:2601011200 done date:2601011201 stat:DELIVRD err:000 text:Hello: world id:x');
    expect(fields).toEqual({
      id: '0123456789', sub: '001', dlvrd: '001', 'submit date': '2601011200', 'done date': '2601011201', stat: 'DELIVRD', err: '000', text: 'Hello: world id:x',
    });
  });

  it('accepts other case and missing fields', () => {
    expect(parseReceiptText('ID:ab12 STAT:UNDELIV ERR:005')).toEqual({ id: 'ab12', stat: 'UNDELIV', err: '005' });
    expect(parseReceiptText('nothing here')).toEqual({});
  });
});

describe('readReceipt', () => {
  it('reads a delivered receipt from its text', () => {
    expect(readReceipt({ text: 'id:77 sub:001 dlvrd:001 submit date:2601011200 done date:2601011201 stat:DELIVRD err:000 text:hi' })).toEqual({
      smscMessageId: '77', alternativeIds: ['4d', '4D'], stat: 'DELIVRD', outcome: 'delivered', errorCode: null, carrierError: null,
    });
  });

  it('reports a failure as DLR_<stat> with the carrier error', () => {
    expect(readReceipt({ text: 'id:abc stat:UNDELIV err:005' })).toMatchObject({ outcome: 'failed', errorCode: 'DLR_UNDELIV', carrierError: 'err:005' });
    expect(readReceipt({ text: 'id:abc stat:EXPIRED err:000' })).toMatchObject({ outcome: 'failed', errorCode: 'DLR_EXPIRED', carrierError: null });
    expect(readReceipt({ text: 'id:abc stat:REJECTED' })).toMatchObject({ outcome: 'failed', stat: 'REJECTD', errorCode: 'DLR_REJECTD' });
  });

  it('keeps ENROUTE and ACCEPTD as intermediate', () => {
    expect(readReceipt({ text: 'id:1 stat:ENROUTE' })?.outcome).toBe('pending');
    expect(readReceipt({ text: 'id:1 stat:ACCEPTD' })?.outcome).toBe('pending');
  });

  it('prefers the receipted_message_id and message_state TLVs to the text', () => {
    const r = readReceipt({ text: 'id:wrong stat:DELIVRD', receiptedMessageId: 'right\0', messageState: 5, networkErrorCode: Uint8Array.from([3, 0, 42]) });
    expect(r).toMatchObject({ smscMessageId: 'right', stat: 'UNDELIV', outcome: 'failed', errorCode: 'DLR_UNDELIV', carrierError: 'network 3 error 42' });
    expect(readReceipt({ text: '', receiptedMessageId: 'x1', messageState: 2 })).toMatchObject({ smscMessageId: 'x1', outcome: 'delivered' });
  });

  it('answers undefined without any message id', () => {
    expect(readReceipt({ text: 'stat:DELIVRD' })).toBeUndefined();
  });
});

describe('alternativeIds', () => {
  it('gives the other base of a numeric id', () => {
    expect(alternativeIds('255')).toEqual(['ff', 'FF']);
    expect(alternativeIds('ff')).toEqual(['255']);
    expect(alternativeIds('msg-1')).toEqual([]);
  });
});
