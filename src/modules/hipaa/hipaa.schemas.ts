/** Input schemas of the HIPAA settings, shared by GraphQL and REST. */
import { z } from 'zod';
import { BAA_STATUSES } from './hipaa.entities.ts';

export const hipaaUpdateInput = z.object({
  enabled: z.boolean().nullish(),
  retention_days: z.number().int().min(30).max(3650).nullish(),
  compliance_officer: z.object({
    name: z.string().trim().min(1).max(200),
    email: z.email().max(320),
  }).nullish(),
  /** Custom metadata keys that hold PHI; `*` marks every key (the default). */
  phi_metadata_fields: z.array(z.string().trim().min(1).max(100)).max(100).nullish(),
});

export const baaUpdateInput = z.object({
  status: z.enum(BAA_STATUSES),
  signed_date: z.iso.date().or(z.iso.datetime({ offset: true })).nullish(),
  document_url: z.url({ protocol: /^https$/ }).max(2048).nullish(),
});
