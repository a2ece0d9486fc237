/** The Twilio-compatible route table: every resource's routes. */
import { messageRoutes } from './messages.ts';
import type { TwilioRoute } from './route.ts';

export const twilioRoutes: readonly TwilioRoute[] = [...messageRoutes];
