/** The Twilio-compatible route table: every resource's routes. */
import { callRoutes } from './calls.ts';
import { messageRoutes } from './messages.ts';
import { numberRoutes } from './numbers.ts';
import type { TwilioRoute } from './route.ts';
import { verifyRoutes } from './verify.ts';

export const twilioRoutes: readonly TwilioRoute[] = [...messageRoutes, ...callRoutes, ...numberRoutes, ...verifyRoutes];
