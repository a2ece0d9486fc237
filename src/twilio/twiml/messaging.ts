/**
 * Messaging TwiML: what a number's SmsUrl answers to an inbound message is carried out, as Twilio
 * does. `<Message>` sends a reply (to the sender, from the number that received, unless `to` /
 * `from` say otherwise; its text or its `<Body>`; `action` becomes the reply's StatusCallback),
 * `<Redirect>` fetches the next document with the same parameters (signed, fetch.ts), at most
 * {@link MAX_REDIRECTS} times. An empty answer (or plain text, or `<Response/>`) sends nothing.
 *
 * The answer arrives through the webhooks context's delivery of the SmsUrl callback
 * (CallbackFormat.answered), which may run it again after a crash: each reply is sent under an
 * Idempotency-Key made of the delivery id, the document (redirect hop) and the verb's position, so
 * a second run finds the first run's messages instead of sending twice.
 *
 * Not carried out, and logged: `<Media>` (this service's SMS has no media yet: the reply goes
 * without it), verbs other than these two (Twilio's 12200 "schema validation warning"), and a
 * document that cannot be fetched or parsed (11200, 12100): nothing more is sent from it.
 */
import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { MessagingService } from '../../modules/messaging/messaging.service.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { systemScope } from '../../platform/auth/scope.ts';
import { newId } from '../../platform/ids.ts';
import type { Logger } from '../../platform/logger.ts';
import { Organization, planOf } from '../../platform/tenancy/tenancy.entities.ts';
import { twilioCallbackUrl } from '../callbacks.ts';
import type { TwilioTokens } from '../tokens.ts';
import { postForTwiml } from './fetch.ts';
import { parseTwiml, TwimlError, type Verb } from './parse.ts';

export const MAX_REDIRECTS = 5;

type Deps = {
  orm: MikroORM;
  messaging: Pick<MessagingService, 'sendSms'>;
  tokens: TwilioTokens;
  allowLoopback: boolean;
  log: Logger;
};

export class MessagingTwiml {
  readonly #d: Deps;

  constructor(deps: Deps) {
    this.#d = deps;
  }

  /** Carries out the answer to an inbound message's SmsUrl callback (`payload`: the posted parameters). */
  async answered(tenant: TenantRef, deliveryId: string, url: string, payload: string, answer: { status: number; contentType: string | undefined; body: string }): Promise<void> {
    const inbound = Object.fromEntries(new URLSearchParams(payload));
    // A status callback's answer is not read (as Twilio ignores it); only an inbound message's is TwiML.
    if (inbound.SmsStatus !== 'received') return;
    let document = answer.body;
    let documentUrl = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      if (!/^\s*</.test(document)) return;
      let verbs: Verb[];
      try {
        verbs = parseTwiml(document);
      } catch (e) {
        this.#report(tenant, deliveryId, e);
        return;
      }
      let redirect: string | undefined;
      for (const [position, verb] of verbs.entries()) {
        if (verb.name === 'Message') await this.#reply(tenant, inbound, verb, `${deliveryId}:${hop}:${position}`, documentUrl);
        else if (verb.name === 'Redirect') {
          redirect = new URL(verb.text, documentUrl).toString();
          break;
        } else this.#report(tenant, deliveryId, new TwimlError(12200, `Schema validation warning: <${verb.name}> is not a messaging verb; it was skipped`));
      }
      if (!redirect) return;
      if (hop === MAX_REDIRECTS) {
        this.#report(tenant, deliveryId, new TwimlError(12200, `More than ${MAX_REDIRECTS} <Redirect>s: the rest was not fetched`));
        return;
      }
      try {
        const r = await postForTwiml(this.#d.tokens, tenant, redirect, inbound, this.#d.allowLoopback);
        if (r.status < 200 || r.status >= 300) throw new TwimlError(11200, `HTTP retrieval failure: ${redirect} answered ${r.status}`);
        document = r.body;
        documentUrl = redirect;
      } catch (e) {
        this.#report(tenant, deliveryId, e instanceof TwimlError ? e : new TwimlError(11200, `HTTP retrieval failure: ${redirect}: ${e instanceof Error ? e.message : String(e)}`));
        return;
      }
    }
  }

  async #reply(tenant: TenantRef, inbound: Record<string, string>, verb: Verb, key: string, documentUrl: string): Promise<void> {
    const bodyVerb = verb.children.find((c) => c.name === 'Body');
    const body = bodyVerb ? bodyVerb.text : verb.text;
    if (verb.children.some((c) => c.name === 'Media')) this.#report(tenant, key, new TwimlError(12200, '<Media> is not sent: this service\'s SMS carries no media yet'));
    if (!body) return;
    const to = verb.attrs.to || inbound.From!;
    const from = verb.attrs.from || inbound.To!;
    const action = verb.attrs.action ? new URL(verb.attrs.action, documentUrl).toString() : undefined;
    const org = await this.#d.orm.em.fork().findOne(Organization, { id: tenant.organizationId });
    if (!org) return;
    const scope = systemScope(tenant.organizationId, tenant.mode, planOf(org, tenant.mode), newId('req'));
    const hash = createHash('sha256').update(`${to}\n${from}\n${body}\n${action ?? ''}`).digest('hex').slice(0, 32);
    try {
      await this.#d.messaging.sendSms(scope, { to, from, body, ...(action ? { webhook_url: twilioCallbackUrl(action) } : {}) }, { idempotency: { key: `0:twiml:${key}`, hash, resumed: true } });
    } catch (e) {
      this.#report(tenant, key, e);
    }
  }

  #report(tenant: TenantRef, at: string, e: unknown): void {
    const code = e instanceof TwimlError ? e.code : (e as { code?: unknown }).code;
    this.#d.log.warn({ organization_id: tenant.organizationId, mode: tenant.mode, twiml: at, code, err: e instanceof Error ? e.message : String(e) }, 'messaging TwiML: not carried out');
  }
}
