/** SMS: `POST /v1/messages/sms`. */
import { z } from 'zod';
import { phoneSchema } from '../../../platform/recipients.ts';
import { MESSAGE_LIMITS, compact, optionalBody, commonFields, templateFields, bodyOrTemplate, httpsUrl, invalid, optional, type Metadata } from './shared.ts';

/**
 * MMS limits. The spec gives none, so Twilio's: at most 10 media of at most 5 MB in all, of the
 * image, audio, video, vCard and PDF types carriers take
 * (https://www.twilio.com/docs/messaging/guides/accepted-mime-types). Nothing is fetched at
 * acceptance: the count is checked, and a URL whose path ends in a file extension of a type MMS
 * does not carry (an archive, a program, a web page, SVG, …) is refused (VALIDATION_ERROR on
 * `media_urls[i]`). A URL with a media extension, or with none the service knows (a signed CDN
 * link), is accepted; the size and the served Content-Type are the carrier's to check when it
 * fetches the media, and its refusal fails the message with its code in `error_code`.
 */
export const MMS_MAX_MEDIA = 10;
export const MMS_MAX_TOTAL_BYTES = 5 * 1024 * 1024;
/** Extensions of files that are not MMS media: refused at acceptance. */
const NOT_MMS_EXTENSIONS = new Set([
  'exe', 'msi', 'dmg', 'apk', 'ipa', 'iso', 'bin', 'bat', 'sh', 'jar', 'js', 'mjs', 'html', 'htm', 'xhtml', 'xml', 'json', 'svg', 'svgz',
  'zip', 'rar', '7z', 'tar', 'gz', 'tgz', 'bz2', 'xz', 'psd', 'ai', 'eps', 'doc', 'docx', 'xls', 'xlsx', 'ppt', 'pptx', 'odt',
  'mkv', 'avi', 'wmv', 'flv', 'swf', 'flac', 'wma', 'heic', 'heif', 'raw', 'cr2', 'nef',
]);

/** The extension of the URL's last path segment, lower case ('' when it has none). */
function extensionOf(url: string): string {
  const last = new URL(url).pathname.split('/').pop() ?? '';
  return /\.([A-Za-z0-9]{1,8})$/.exec(last)?.[1]?.toLowerCase() ?? '';
}

export type SendSmsInput = {
  to: string;
  body?: string;
  /** MMS: https URLs of the media (images, video, audio, vCard); sent by carrier API connectors only. */
  media_urls?: string[];
  template_id?: string;
  variables?: Record<string, unknown>;
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

export const sendSmsInput: z.ZodType<SendSmsInput> = z.object({
  to: phoneSchema,
  body: optionalBody(MESSAGE_LIMITS.smsBody),
  media_urls: optional(z.array(httpsUrl).min(1).max(MMS_MAX_MEDIA)),
  ...templateFields,
  ...commonFields,
}).superRefine((v, ctx) => {
  (v.media_urls ?? []).forEach((url, i) => {
    const ext = extensionOf(url);
    if (NOT_MMS_EXTENSIONS.has(ext)) invalid(ctx, ['media_urls', i], `.${ext} files are not MMS media (images, audio, video, vCard or PDF, ${MMS_MAX_TOTAL_BYTES / 1024 / 1024} MB in all)`);
  });
}).transform((v, ctx) => (bodyOrTemplate(ctx, v, v.media_urls !== undefined) ? compact(v) : z.NEVER));
