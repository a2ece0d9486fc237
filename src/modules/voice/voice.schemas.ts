/** Input schemas of the voice context, shared by GraphQL and REST (snake_case wire shape). */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { emailSchema, phoneSchema } from '../../platform/recipients.ts';
import { CALL_STATUSES, DTMF_KEYS, FALLBACK_ACTIONS, IVR_ACTIONS, type IvrMenu } from './voice.states.ts';

const id = z.string().trim().min(1).max(100);
const url = z.string().trim().min(1).max(2048);
const name = z.string().trim().min(1).max(200);
const metadata = z.record(z.string().max(100), z.unknown()).refine((m) => JSON.stringify(m).length <= 16_384, 'metadata must be at most 16 KB as JSON');

export const CALL_MAX_DURATION = { min: 1, max: 14_400, default: 3600 } as const;

export const createCallInput = z.object({
  to: phoneSchema,
  from: phoneSchema,
  agent_id: id.nullish(),
  ivr_id: id.nullish(),
  webhook_url: url.nullish(),
  record: z.boolean().nullish(),
  max_duration: z.number().int().min(CALL_MAX_DURATION.min).max(CALL_MAX_DURATION.max).nullish(),
  metadata: metadata.nullish(),
});
export type CreateCallInput = z.infer<typeof createCallInput>;

export const listCallsInput = pageInput.extend({
  status: z.enum(CALL_STATUSES).nullish(),
  from: phoneSchema.nullish(),
  to: phoneSchema.nullish(),
});
export type ListCallsInput = z.infer<typeof listCallsInput>;

export const dtmfInput = z.object({ id, digits: z.string().regex(/^[0-9*#]{1,32}$/, 'digits are 0-9, * and #') });

// ---- SIP trunks ----

/** `sip:` or `sips:` URI with a host (RFC 3261 §19.1, the parts a trunk needs). */
const SIP_URI = /^sips?:(?:[A-Za-z0-9_.!~*'()&=+$,;?/%-]+(?::[^@\s]*)?@)?(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?(?:;[A-Za-z0-9_.!~*'()%=+-]+)*$/;
const sipUri = z.string().trim().max(512).refine((v) => SIP_URI.test(v), 'must be a SIP URI such as sip:trunk.example.com:5060 or sips:user@host');
export const CODECS = ['PCMU', 'PCMA', 'OPUS', 'G722', 'G729'] as const;
export const ENCRYPTIONS = ['tls_srtp', 'tls', 'none'] as const;

const trunkFields = {
  name,
  termination_uri: sipUri,
  origination_uris: z.array(sipUri).max(20).nullish(),
  auth_username: z.string().trim().min(1).max(128).nullish(),
  auth_password: z.string().min(1).max(256).nullish(),
  codecs: z.array(z.enum(CODECS)).min(1).max(CODECS.length).refine((c) => new Set(c).size === c.length, 'codecs must not repeat').nullish(),
  encryption: z.enum(ENCRYPTIONS).nullish(),
};
export const createTrunkInput = z.object(trunkFields);
export type CreateTrunkInput = z.infer<typeof createTrunkInput>;
export const updateTrunkInput = z.object({ id, ...trunkFields, name: name.optional(), termination_uri: sipUri.optional() });
export type UpdateTrunkInput = z.infer<typeof updateTrunkInput>;

// ---- IVR ----

const MAX_MENU_DEPTH = 3;
type OptionInput = { key: string; action: (typeof IVR_ACTIONS)[number]; target?: string | null; prompt?: string | null; menu?: MenuInput | null };
type MenuInput = { prompt?: string | null; options: OptionInput[] };

const optionSchema: z.ZodType<OptionInput> = z.lazy(() => z.object({
  key: z.enum(DTMF_KEYS, { message: `key must be one DTMF key: ${DTMF_KEYS.join(' ')}` }),
  action: z.enum(IVR_ACTIONS),
  target: z.string().trim().min(1).max(100).nullish(),
  prompt: z.string().trim().min(1).max(1000).nullish(),
  menu: menuSchema.nullish(),
}));
const menuSchema: z.ZodType<MenuInput> = z.lazy(() => z.object({
  prompt: z.string().trim().min(1).max(1000).nullish(),
  options: z.array(optionSchema).min(1).max(DTMF_KEYS.length),
}).superRefine((menu, ctx) => checkMenu(menu as IvrMenu, ctx))).meta({ id: 'IvrMenu' }); // its name in the OpenAPI document (it is recursive)

/** Unique keys; targets present where the action needs one; submenus only under `submenu`, not too deep. */
function checkMenu(menu: IvrMenu, ctx: z.RefinementCtx, depth = 1): void {
  const seen = new Set<string>();
  menu.options.forEach((o, i) => {
    const at = ['options', i];
    if (seen.has(o.key)) ctx.addIssue({ code: 'custom', path: [...at, 'key'], message: `key ${o.key} is used twice in the same menu` });
    seen.add(o.key);
    const needsTarget = o.action === 'transfer_agent' || o.action === 'transfer_number' || o.action === 'voicemail';
    if (needsTarget && !o.target) ctx.addIssue({ code: 'custom', path: [...at, 'target'], message: `action ${o.action} needs a target` });
    if (!needsTarget && o.target) ctx.addIssue({ code: 'custom', path: [...at, 'target'], message: `action ${o.action} takes no target` });
    if (o.action === 'submenu' && !o.menu) ctx.addIssue({ code: 'custom', path: [...at, 'menu'], message: 'action submenu needs a menu' });
    if (o.action !== 'submenu' && o.menu) ctx.addIssue({ code: 'custom', path: [...at, 'menu'], message: 'only a submenu option has a menu' });
    if (o.menu && depth >= MAX_MENU_DEPTH) ctx.addIssue({ code: 'custom', path: [...at, 'menu'], message: `menus nest at most ${MAX_MENU_DEPTH} levels deep` });
  });
}

export const IVR_DEFAULTS = { language: 'en-US', timeoutSeconds: 10, maxRetries: 3, fallbackAction: 'voicemail' } as const;

const ivrFields = {
  name,
  greeting: z.string().trim().min(1).max(2000),
  language: z.string().trim().regex(/^[a-z]{2,3}(?:-[A-Z]{2})?$/, 'language is a code such as en-US').nullish(),
  menu: menuSchema,
  timeout_seconds: z.number().int().min(1).max(60).nullish(),
  max_retries: z.number().int().min(0).max(10).nullish(),
  fallback_action: z.enum(FALLBACK_ACTIONS).nullish(),
  /** voicemail: a box id (default: the first box the menu names); transfer_number: E.164. */
  fallback_target: z.string().trim().min(1).max(100).nullish(),
};
export const createIvrInput = z.object(ivrFields);
export type CreateIvrInput = z.infer<typeof createIvrInput>;
export const updateIvrInput = z.object({ id, ...z.object(ivrFields).partial().shape });
export type UpdateIvrInput = z.infer<typeof updateIvrInput>;

// ---- conferences ----

export const CONFERENCE_MAX_PARTICIPANTS = { min: 2, max: 250, default: 50 } as const;
export const createConferenceInput = z.object({
  name,
  max_participants: z.number().int().min(CONFERENCE_MAX_PARTICIPANTS.min).max(CONFERENCE_MAX_PARTICIPANTS.max).nullish(),
  record: z.boolean().nullish(),
  mute_on_join: z.boolean().nullish(),
  webhook_url: url.nullish(),
  pin: z.string().regex(/^\d{4,10}$/, 'pin is 4-10 digits').nullish(),
  dial_in_number: phoneSchema.nullish(),
});
export type CreateConferenceInput = z.infer<typeof createConferenceInput>;
export const addParticipantInput = z.object({ id, number: phoneSchema, muted: z.boolean().nullish() });
export type AddParticipantInput = z.infer<typeof addParticipantInput>;
export const participantInput = z.object({ id, participant_id: id });
export const pageOfInput = pageInput.extend({ id });

// ---- voicemail ----

export const VOICEMAIL_MAX_DURATION = { min: 5, max: 600, default: 120 } as const;
export const createVoicemailInput = z.object({
  name,
  greeting: z.string().trim().min(1).max(2000).nullish(),
  transcribe: z.boolean().nullish(),
  max_duration: z.number().int().min(VOICEMAIL_MAX_DURATION.min).max(VOICEMAIL_MAX_DURATION.max).nullish(),
  notification_email: emailSchema.nullish(),
  webhook_url: url.nullish(),
});
export type CreateVoicemailInput = z.infer<typeof createVoicemailInput>;
export const listVoicemailMessagesInput = pageInput.extend({ id, listened: z.boolean().nullish() });
export const markListenedInput = z.object({ id, message_id: id, listened: z.boolean().nullish() });

export const recordingInput = z.object({ id, expires: z.string().regex(/^\d{1,12}$/), signature: z.string().regex(/^[A-Za-z0-9_-]{16,64}$/) });
