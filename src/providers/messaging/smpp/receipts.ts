/**
 * Delivery receipts in deliver_sm (SMPP 3.4 §5.2.12 esm_class, Appendix B receipt text, §5.3.2.12
 * receipted_message_id, §5.3.2.35 message_state, §5.3.2.31 network_error_code). A receipt names the
 * SMSC's message id and a state; the TLVs win over the text when both are there (the text format is
 * only a de-facto standard: `id:… sub:001 dlvrd:001 submit date:YYMMDDhhmm done date:YYMMDDhhmm
 * stat:DELIVRD err:000 text:…`). DELIVRD is delivered; EXPIRED, DELETED, UNDELIV, REJECTD, UNKNOWN
 * and SKIPPED are failures, reported with the error code `DLR_<stat>`; ENROUTE and ACCEPTD are
 * intermediate (the message stays `sent`).
 */

/** esm_class message-type bits (2–5): a receipt or intermediate notification rather than a mobile-originated message. */
const ESM_TYPE_MASK = 0x3c;
export const ESM_SMSC_RECEIPT = 0x04;
const ESM_SME_ACK = 0x08;
const ESM_USER_ACK = 0x10;
const ESM_INTERMEDIATE = 0x20;

export type DeliverKind = 'receipt' | 'ack' | 'mo';

/** What a deliver_sm carries, by its esm_class: a delivery receipt, an SME acknowledgement (nothing to do), or a mobile-originated message. */
export function deliverKind(esmClass: number): DeliverKind {
  const type = esmClass & ESM_TYPE_MASK;
  if (type === ESM_SMSC_RECEIPT || type === ESM_INTERMEDIATE) return 'receipt';
  if (type === ESM_SME_ACK || type === ESM_USER_ACK) return 'ack';
  return 'mo';
}

/** The receipt text's fields by name (`submit date` and `done date` keep their space), values as written. */
export function parseReceiptText(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  // `text:` is last and runs to the end (it may contain anything); the other values have no spaces.
  const textAt = text.search(/\btext:/i);
  const head = textAt >= 0 ? text.slice(0, textAt) : text;
  if (textAt >= 0) fields.text = text.slice(textAt + 5);
  const re = /(id|sub|dlvrd|submit date|done date|stat|err):(\S*)/gi;
  for (let m = re.exec(head); m; m = re.exec(head)) fields[m[1]!.toLowerCase()] = m[2]!;
  return fields;
}

/** message_state values (§5.2.28) → the receipt stat they stand for. */
const MESSAGE_STATES: Record<number, string> = {
  1: 'ENROUTE', 2: 'DELIVRD', 3: 'EXPIRED', 4: 'DELETED', 5: 'UNDELIV', 6: 'ACCEPTD', 7: 'UNKNOWN', 8: 'REJECTD', 9: 'SKIPPED',
};

/** Spellings SMSCs use for the same stat. */
const STAT_ALIASES: Record<string, string> = {
  DELIVERED: 'DELIVRD', UNDELIVERABLE: 'UNDELIV', UNDELIVERED: 'UNDELIV', REJECTED: 'REJECTD', ACCEPTED: 'ACCEPTD', FAILED: 'UNDELIV',
};

const FINAL_FAILURES = new Set(['EXPIRED', 'DELETED', 'UNDELIV', 'REJECTD', 'UNKNOWN', 'SKIPPED']);

export type ReceiptOutcome = 'delivered' | 'failed' | 'pending';

export type Receipt = {
  /** The SMSC's message id as the receipt names it. */
  smscMessageId: string;
  /** Further spellings of the same id (decimal ↔ hexadecimal: SMSCs differ between submit_sm_resp and the receipt). */
  alternativeIds: string[];
  stat: string;
  outcome: ReceiptOutcome;
  /** `DLR_<stat>` for a failure. */
  errorCode: string | null;
  /** The carrier's error (`err:` of the text, or network_error_code), for the message's error message. */
  carrierError: string | null;
};

export type ReceiptFields = {
  text: string;
  receiptedMessageId?: string | undefined;
  messageState?: number | undefined;
  /** network_error_code: network type, then a 16-bit error. */
  networkErrorCode?: Uint8Array | undefined;
};

/** The receipt a deliver_sm carries, or undefined when it names no message id. */
export function readReceipt(fields: ReceiptFields): Receipt | undefined {
  const parsed = parseReceiptText(fields.text);
  const id = (fields.receiptedMessageId ?? '').replace(/\0+$/, '') || parsed.id;
  if (!id) return undefined;
  const fromText = (parsed.stat ?? '').toUpperCase();
  const stat = (fields.messageState !== undefined ? MESSAGE_STATES[fields.messageState] : undefined) ?? STAT_ALIASES[fromText] ?? (fromText || 'UNKNOWN');
  const outcome: ReceiptOutcome = stat === 'DELIVRD' ? 'delivered' : FINAL_FAILURES.has(stat) ? 'failed' : 'pending';
  const network = fields.networkErrorCode && fields.networkErrorCode.length >= 3
    ? `network ${fields.networkErrorCode[0]} error ${(fields.networkErrorCode[1]! << 8) | fields.networkErrorCode[2]!}` : null;
  const carrierError = parsed.err && !/^0+$/.test(parsed.err) ? `err:${parsed.err}` : network;
  return { smscMessageId: id, alternativeIds: alternativeIds(id), stat, outcome, errorCode: outcome === 'failed' ? `DLR_${stat}` : null, carrierError };
}

/** The id in the other base, when it reads as a number in one (both cases for hexadecimal). */
export function alternativeIds(id: string): string[] {
  const out = new Set<string>();
  if (/^[0-9]{1,30}$/.test(id)) {
    const hex = BigInt(id).toString(16);
    out.add(hex);
    out.add(hex.toUpperCase());
  }
  if (/^[0-9a-fA-F]{1,24}$/.test(id) && /[a-fA-F]/.test(id)) out.add(BigInt(`0x${id}`).toString(10));
  out.delete(id);
  return [...out];
}
