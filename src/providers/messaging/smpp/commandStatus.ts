/**
 * SMPP command_status values (SMPP 3.4 §5.1.3) and what each means for a submit_sm: the SMSC is
 * too busy (slow down and submit again: nothing was accepted), a temporary fault (retry later,
 * possibly through another route), or a permanent refusal of this message (it fails with the
 * status's name as error code, e.g. ESME_RINVDSTADR).
 */
import smpp from 'smpp';

const NAMES = new Map<number, string>(Object.entries(smpp.errors as Record<string, number>).map(([name, value]) => [value, name]));

/** `ESME_RINVDSTADR` for 0x0B; `SMPP_0x00000400` for a value SMPP 3.4 does not name (vendor-specific). */
export function commandStatusName(status: number): string {
  return NAMES.get(status) ?? `SMPP_0x${status.toString(16).padStart(8, '0').toUpperCase()}`;
}

/** `ESME_RINVDSTADR (0x0000000B)`, for error messages. */
export function describeCommandStatus(status: number): string {
  return `${commandStatusName(status)} (0x${status.toString(16).padStart(8, '0').toUpperCase()})`;
}

export const ESME_ROK = 0x00;
export const ESME_RTHROTTLED = 0x58;
export const ESME_RMSGQFUL = 0x14;
export const ESME_RX_T_APPN = 0x64;
export const ESME_RX_R_APPN = 0x65;

/** The SMSC asks to slow down: the submit was refused, submitting it again is safe. */
export const BUSY_STATUSES: ReadonlySet<number> = new Set([ESME_RTHROTTLED, ESME_RMSGQFUL]);

/**
 * Temporary faults: the SMSC did not take the message and may later (system error, not bound, its
 * own application's temporary error, submit failed). Retried later, and may fail over to another route.
 */
export const TEMPORARY_STATUSES: ReadonlySet<number> = new Set([0x04, 0x08, 0x45, ESME_RX_T_APPN, 0xfe, 0xff]);

export type StatusClass = 'ok' | 'busy' | 'temporary' | 'permanent';

export function classifyCommandStatus(status: number): StatusClass {
  if (status === ESME_ROK) return 'ok';
  if (BUSY_STATUSES.has(status)) return 'busy';
  if (TEMPORARY_STATUSES.has(status)) return 'temporary';
  return 'permanent';
}
