/**
 * One-time codes: generation (`crypto.randomInt`, uniform decimal digits), their only stored form
 * (HMAC-SHA256 under a key derived from APP_SECRET, bound to the verification id so equal codes of
 * two verifications hash differently), constant-time comparison, and the built-in localized texts
 * that carry a code to the recipient. A code exists in clear only in memory during the send, in the
 * payload messaging keeps sealed until delivery, and at the provider.
 */
import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';

export const CODE_LENGTH = { min: 4, max: 10, default: 6 } as const;

/** `length` uniformly random decimal digits (leading zeros included: a code is a string). */
export function generateCode(length: number): string {
  if (!Number.isInteger(length) || length < CODE_LENGTH.min || length > CODE_LENGTH.max) {
    throw new RangeError(`code length must be an integer from ${CODE_LENGTH.min} to ${CODE_LENGTH.max}`);
  }
  let code = '';
  for (let i = 0; i < length; i++) code += String(randomInt(0, 10));
  return code;
}

export class CodeHasher {
  readonly #key: Buffer;

  constructor(appSecret: string) {
    // Its own key per purpose: the API-key hashes and cursor signatures use APP_SECRET differently.
    this.#key = createHmac('sha256', appSecret).update('verify:code-hmac:v1').digest();
  }

  #mac(verificationId: string, code: string): Buffer {
    return createHmac('sha256', this.#key).update(`${verificationId}\u0000${code}`).digest();
  }

  /** The stored form of a code: hex HMAC-SHA256 of (verification id, code). */
  hash(verificationId: string, code: string): string {
    return this.#mac(verificationId, code).toString('hex');
  }

  /** Whether `candidate` is the code behind `storedHash`, compared in constant time. */
  matches(verificationId: string, candidate: string, storedHash: string): boolean {
    const expected = Buffer.from(storedHash, 'hex');
    const given = this.#mac(verificationId, candidate);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }
}

export const LOCALES = ['en', 'es', 'fr', 'de', 'tr', 'ar'] as const;
export type Locale = (typeof LOCALES)[number];
export const DEFAULT_LOCALE: Locale = 'en';

/** `es`, `ES`, `es-MX` and `es_MX` are `es`; a language we do not ship is undefined. */
export function normalizeLocale(input: string): Locale | undefined {
  const primary = input.trim().toLowerCase().split(/[-_]/)[0] ?? '';
  return (LOCALES as readonly string[]).includes(primary) ? (primary as Locale) : undefined;
}

type Texts = {
  line: (code: string, appName: string | null) => string;
  warning: string;
  subject: (appName: string | null) => string;
  dir: 'ltr' | 'rtl';
};

const TEXTS: Record<Locale, Texts> = {
  en: {
    line: (code, app) => (app ? `Your ${app} verification code is: ${code}` : `Your verification code is: ${code}`),
    warning: 'Do not share this code with anyone.',
    subject: (app) => (app ? `Your ${app} verification code` : 'Your verification code'),
    dir: 'ltr',
  },
  es: {
    line: (code, app) => (app ? `Tu código de verificación de ${app} es: ${code}` : `Tu código de verificación es: ${code}`),
    warning: 'No compartas este código con nadie.',
    subject: (app) => (app ? `Tu código de verificación de ${app}` : 'Tu código de verificación'),
    dir: 'ltr',
  },
  fr: {
    line: (code, app) => (app ? `Votre code de vérification ${app} est : ${code}` : `Votre code de vérification est : ${code}`),
    warning: 'Ne le partagez avec personne.',
    subject: (app) => (app ? `Votre code de vérification ${app}` : 'Votre code de vérification'),
    dir: 'ltr',
  },
  de: {
    line: (code, app) => (app ? `Ihr Bestätigungscode für ${app} lautet: ${code}` : `Ihr Bestätigungscode lautet: ${code}`),
    warning: 'Geben Sie diesen Code an niemanden weiter.',
    subject: (app) => (app ? `Ihr Bestätigungscode für ${app}` : 'Ihr Bestätigungscode'),
    dir: 'ltr',
  },
  tr: {
    line: (code, app) => (app ? `${app} doğrulama kodunuz: ${code}` : `Doğrulama kodunuz: ${code}`),
    warning: 'Bu kodu kimseyle paylaşmayın.',
    subject: (app) => (app ? `${app} doğrulama kodunuz` : 'Doğrulama kodunuz'),
    dir: 'ltr',
  },
  ar: {
    line: (code, app) => (app ? `رمز التحقق الخاص بك لدى ${app} هو: ${code}` : `رمز التحقق الخاص بك هو: ${code}`),
    warning: 'لا تشارك هذا الرمز مع أي شخص.',
    subject: (app) => (app ? `رمز التحقق الخاص بك لدى ${app}` : 'رمز التحقق الخاص بك'),
    dir: 'rtl',
  },
};

export type CodeMessage = {
  /** SMS and WhatsApp text; also the email's text part. */
  text: string;
  subject: string;
  html: string;
};

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The built-in message that carries `code`, in `locale`, naming the organization's app when it set one. */
export function codeMessage(locale: Locale, code: string, appName: string | null): CodeMessage {
  const t = TEXTS[locale];
  const line = t.line(code, appName);
  return {
    text: `${line}\n${t.warning}`,
    subject: t.subject(appName),
    html: `<div dir="${t.dir}" lang="${locale}"><p>${escapeHtml(line)}</p><p>${escapeHtml(t.warning)}</p></div>`,
  };
}

/**
 * The code inside a sent text (the sandbox route reads it back from the provider's record): with
 * `accept` (a check against the stored HMAC), the run of exactly `length` digits it confirms;
 * without (the hash is erased once a verification is final), the first such run.
 */
export function findCode(text: string, length: number, accept?: (candidate: string) => boolean): string | undefined {
  const runs = [...text.matchAll(/\d+/g)].map((m) => m[0]).filter((run) => run.length === length);
  return accept ? runs.find(accept) : runs[0];
}
