/** Input schemas of the webhooks context, shared by GraphQL and REST. */
import { z } from 'zod';

export const createWebhookInput = z.object({
  url: z.string().trim().min(1).max(2048),
  events: z.array(z.string().trim().min(1).max(100)).min(1).max(100),
  description: z.string().max(500).nullish(),
});
export type CreateWebhookInput = z.infer<typeof createWebhookInput>;

/** The create fields, each optional (`events` replaces the whole list), and `active`. */
export const updateWebhookInput = createWebhookInput.partial().extend({ active: z.boolean().optional() });
export type UpdateWebhookInput = z.infer<typeof updateWebhookInput>;
