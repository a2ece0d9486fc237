/** The billing context's admin command: `npm run -s admin -- org plan` puts an organization on a plan as its contract says. */
import type { Organization } from '../../platform/tenancy/tenancy.entities.ts';
import { PLANS, type Plan } from '../../platform/tenancy/tenancy.entities.ts';
import type { AdminCommand } from '../manifest.ts';
import { operatorSetPlan } from './plan.change.ts';

export const BILLING_COMMANDS: Readonly<Record<string, AdminCommand>> = {
  'org plan': {
    usage: `org plan --org ID --plan ${PLANS.join('|')} [--mode live|test|both] [--json]`,
    summary: 'Puts the organization on a plan (default: in both modes), as its contract says: no payment provider is asked. The plan its keys act on (rate limits, quotas) and its billing subscription change at once, with a billing.subscription_updated event; running instances pick it up at once.',
    options: ['org', 'plan', 'mode'],
    async run(ctx) {
      const id = ctx.option('org');
      if (!id) return ctx.fail('--org is required');
      const plan = ctx.oneOf<Plan>('plan', PLANS);
      const mode = ctx.oneOf('mode', ['live', 'test', 'both'] as const, 'both');
      const org = (await ctx.organizations()).find((o: Organization) => o.id === id);
      if (!org) return ctx.fail(`there is no organization ${id}`);
      const modes = mode === 'both' ? (['live', 'test'] as const) : [mode];
      const changed = await operatorSetPlan(ctx.orm, org.id, modes, plan, ctx.clock.now());
      ctx.out({ organization_id: org.id, plan, modes, changed },
        changed.length ? `${org.id} is on ${plan} (${changed.join(' and ')} changed)` : `${org.id} was already on ${plan}`);
    },
  },
};
