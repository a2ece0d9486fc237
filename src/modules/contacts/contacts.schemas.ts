/**
 * Input schemas of the contacts context, shared by GraphQL and REST (snake_case wire shapes).
 * Phone and email raise INVALID_PHONE_NUMBER / INVALID_EMAIL (messaging's recipient fields);
 * everything else VALIDATION_ERROR with details.field (see parseInput).
 */
import { isSupportedCountry } from 'libphonenumber-js/max';
import { z } from 'zod';
import { emailSchema, phoneSchema } from '../../platform/recipients.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import { API_CONSENT_SOURCES, CONSENT_CHANNELS, CONSENT_STATUSES, LIFECYCLE_STAGES } from './contacts.entities.ts';

export const MAX_TAGS = 50;
export const MAX_METADATA_BYTES = 16_384;

export const countrySchema = z.string().trim().transform((value, ctx) => {
  const code = value.toUpperCase();
  if (!/^[A-Z]{2}$/.test(code) || !isSupportedCountry(code)) {
    ctx.addIssue({ code: 'custom', message: 'must be an ISO 3166-1 alpha-2 country code, such as US or GB' });
    return z.NEVER;
  }
  return code;
});

export const tagSchema = z.string().trim().min(1).max(64).regex(/^[^,\s][^,]*$/, 'must not contain commas');
const name = z.string().trim().min(1).max(100);
const metadata = z.record(z.string().min(1).max(64), z.unknown())
  .refine((m) => JSON.stringify(m).length <= MAX_METADATA_BYTES, `must be at most ${MAX_METADATA_BYTES} bytes as JSON`);
const consentStatus = z.enum(CONSENT_STATUSES);
/** `{ sms: "opted_out", email: "opted_in" }`: channels not named are left as they are. */
export const consentInput = z.partialRecord(z.enum(CONSENT_CHANNELS), consentStatus);

export const createContactInput = z.object({
  phone: phoneSchema.nullish(),
  email: emailSchema.nullish(),
  first_name: name.nullish(),
  last_name: name.nullish(),
  country: countrySchema.nullish(),
  lifecycle_stage: z.enum(LIFECYCLE_STAGES).nullish(),
  tags: z.array(tagSchema).max(MAX_TAGS).nullish(),
  metadata: metadata.nullish(),
  consent: consentInput.nullish(),
});
export type CreateContactInput = z.infer<typeof createContactInput>;

/**
 * The create fields but consent (changed through preferences): absent leaves a field as it is; null
 * clears it. `metadata` is merged (a null value removes that key); `tags` replaces the set.
 */
export const updateContactInput = createContactInput.omit({ consent: true });
export type UpdateContactInput = z.infer<typeof updateContactInput>;

const search = z.string().trim().min(1).max(200);

export const listContactsInput = pageInput.extend({
  search: search.nullish(),
  lifecycle_stage: z.enum(LIFECYCLE_STAGES).nullish(),
  country: countrySchema.nullish(),
  tag: tagSchema.nullish(),
});
export type ListContactsInput = z.infer<typeof listContactsInput>;

export const listOptOutsInput = pageInput.extend({
  channel: z.enum(CONSENT_CHANNELS).nullish(),
  search: search.nullish(),
});
export type ListOptOutsInput = z.infer<typeof listOptOutsInput>;

export const tagsInput = z.intersection(idInput, z.object({ tags: z.array(tagSchema).min(1).max(MAX_TAGS) }));
export const removeTagInput = z.intersection(idInput, z.object({ tag: z.string().min(1).max(64) }));

export const preferencesInput = z.intersection(idInput, z.object({
  preferences: consentInput.refine((m) => Object.keys(m).length > 0, 'must name at least one channel'),
  source: z.enum(API_CONSENT_SOURCES).nullish(),
}));

/**
 * What a client sends to `PUT /v1/contacts/{id}/preferences`: the channel map itself, plus an
 * optional `source` (the route moves the map under `preferences`). It documents the wire body.
 */
export const preferencesBody = z.object({
  ...Object.fromEntries(CONSENT_CHANNELS.map((channel) => [channel, consentStatus.optional()])),
  source: z.enum(API_CONSENT_SOURCES).nullish(),
}).strict();

export const listInput = z.object({ name: z.string().trim().min(1).max(200), description: z.string().trim().max(1000).nullish() });
export const updateListInput = z.intersection(idInput, listInput.partial());
export const membersInput = z.intersection(idInput, z.object({ contact_ids: z.array(z.string().min(1).max(100)).min(1).max(1000) }));
export const removeMemberInput = z.intersection(idInput, z.object({ contact_id: z.string().min(1).max(100) }));
export const idPageInput = pageInput.extend({ id: z.string().min(1).max(100) });
export const consentHistoryInput = idPageInput.extend({ channel: z.enum(CONSENT_CHANNELS).nullish() });

export const segmentInput = z.object({
  name: z.string().trim().min(1).max(200),
  description: z.string().trim().max(1000).nullish(),
  rules: z.record(z.string(), z.unknown()),
});
export const updateSegmentInput = z.intersection(idInput, segmentInput.partial());
export const previewInput = z.object({ rules: z.record(z.string(), z.unknown()), limit: z.number().int().nullish() });
export const previewSegmentInput = z.object({ id: z.string().min(1).max(100), limit: z.number().int().nullish() });

export const MAX_IMPORT_BYTES = 900_000;
export const importInput = z.object({
  csv: z.string().min(1).max(MAX_IMPORT_BYTES),
  list_id: z.string().min(1).max(100).nullish(),
});
