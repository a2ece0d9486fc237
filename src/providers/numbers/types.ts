/**
 * The phone-number inventory port: search a carrier's available numbers, describe one number,
 * provision and release it, and port numbers in from another carrier. One adapter per carrier;
 * the sandbox (test-mode keys) generates its inventory from libphonenumber metadata. Providers
 * never see our entities, only these shapes.
 */
import type { Mode } from '../../platform/db/tenant.ts';

export const NUMBER_TYPES = ['local', 'toll_free', 'mobile', 'short_code'] as const;
export type NumberType = (typeof NUMBER_TYPES)[number];

export const NUMBER_CAPABILITIES = ['sms', 'voice', 'mms', 'whatsapp'] as const;
export type NumberCapability = (typeof NUMBER_CAPABILITIES)[number];

/** A number a carrier offers (a search result), or what a number becomes once provisioned or ported in. */
export type AvailableNumber = {
  /** E.164 */
  number: string;
  /** ISO 3166-1 alpha-2 */
  country: string;
  type: NumberType;
  /** State or province (US, CA), city (GB, DE), else the country's name. */
  region: string;
  /** The national format, e.g. `(415) 555-0134`: the default friendly name. */
  friendlyName: string;
  capabilities: NumberCapability[];
  /** Decimal amount in major units, e.g. `1.15`. */
  monthlyCost: string;
  currency: string;
};

export type NumberSearch = {
  country: string;
  type?: NumberType | undefined;
  /** Every listed capability must be present. */
  capabilities?: readonly NumberCapability[] | undefined;
  /** Leading digits of the national number (the NPA in North America). */
  areaCode?: string | undefined;
  /** Digits and `*` (any one digit), matched anywhere in the national number. */
  contains?: string | undefined;
  limit: number;
};

/** Which of these E.164 numbers are held by a customer (owned or being ported): search skips them. */
export type TakenCheck = (numbers: string[]) => Promise<ReadonlySet<string>>;

export type PortOrder = {
  /** Our port request id: the idempotency key of the submission. */
  id: string;
  numbers: string[];
  currentCarrier: string;
  authorizationName: string;
  accountNumber: string | null;
  pin: string | null;
};

export type PortProgress =
  | { status: 'submitted'; reference: string }
  | { status: 'completed'; reference: string }
  | { status: 'rejected'; code: string; reason: string };

export interface NumbersProvider {
  readonly name: string;
  /** The first `limit` matching numbers, in the provider's order (stable for a query), skipping taken ones. */
  search(query: NumberSearch, taken: TakenCheck): Promise<AvailableNumber[]>;
  /** The listing of one number if this carrier can provision it, else undefined. */
  lookup(number: string): Promise<AvailableNumber | undefined>;
  /** Provisions the number; `idempotencyKey` (our phone number id) makes a repeated call a no-op. */
  provision(number: string, idempotencyKey: string): Promise<{ reference: string }>;
  release(number: string, reference: string | null): Promise<void>;
  /** What a number would become if ported in (type, capabilities, price), or undefined when it cannot be hosted. */
  portable(number: string): Promise<AvailableNumber | undefined>;
  /** Hands the port to the losing carrier: `submitted`, or `rejected` at once. Idempotent per order id. */
  submitPort(order: PortOrder): Promise<PortProgress>;
  /** The port's outcome so far: still `submitted`, `completed`, or `rejected` with a reason. */
  checkPort(order: PortOrder, reference: string): Promise<PortProgress>;
}

export type NumbersProviders = {
  /** Test mode: the sandbox. Live mode: the configured carrier, or undefined (none yet). */
  forMode(mode: Mode): NumbersProvider | undefined;
};

export function createNumbersProviders(opts: { sandbox: NumbersProvider; live?: NumbersProvider | undefined }): NumbersProviders {
  return { forMode: (mode) => (mode === 'test' ? opts.sandbox : opts.live) };
}
