/** The Twilio-compatible route table: every resource's routes, and their callbacks' renderers. */
import type { TwilioRenderer } from './callbacks.ts';
import { callRoutes, renderCall } from './calls.ts';
import { messageRoutes, renderMessage } from './messages.ts';
import { numberRoutes } from './numbers.ts';
import type { TwilioRoute } from './route.ts';
import { verifyRoutes } from './verify.ts';

export const twilioRoutes: readonly TwilioRoute[] = [...messageRoutes, ...callRoutes, ...numberRoutes, ...verifyRoutes];

/** What each resource's Twilio-format callbacks post (callbacks.ts), by the events' resource type. */
export const twilioRenderers: Readonly<Record<string, TwilioRenderer>> = { message: renderMessage, call: renderCall };
