import { Migration } from '@mikro-orm/migrations';

/**
 * The plan's included messages are not paid from credits (issue 17: "beyond an included quota …
 * overage is billed from credits"). `billing_pool_usage` counts what a billing period took from
 * the pool, per account; `credits_take_pool` takes a batch's items from it in order while they
 * fit (the pooled prefix; the account row locked), and `credits_debit_pooled` — the group commit's
 * debit, replacing `credits_debit_batch` there — takes each tenant's pooled prefix and debits the
 * balance for the rest, returning the indexes it charged (or raising `P0402` when a balance does
 * not cover them or a subscription is cancelled or paused).
 */
export class Migration20261128020000_included_pool extends Migration {
  override up(): void {
    this.addSql(`
      create table billing_pool_usage (
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        quota text not null check (quota in ('messages', 'voice_minutes')),
        period_start timestamptz not null,
        used bigint not null default 0 check (used >= 0),
        primary key (organization_id, mode, quota, period_start)
      );

      -- p_included < 0: unlimited (every item pooled). Returns how many leading items were pooled.
      create function credits_take_pool(p_org text, p_mode text, p_quota text, p_units bigint[], p_included bigint) returns int
      language plpgsql as $$
        declare v_period timestamptz; v_status text; v_used bigint; v_left bigint; v_n int := 0; v_taken bigint := 0; u bigint;
        begin
          select current_period_start, status into v_period, v_status from billing_accounts where organization_id = p_org and mode = p_mode for update;
          if v_period is null or v_status in ('cancelled', 'paused') or p_included = 0 then return 0; end if;
          insert into billing_pool_usage (organization_id, mode, quota, period_start) values (p_org, p_mode, p_quota, v_period) on conflict do nothing;
          select used into v_used from billing_pool_usage where organization_id = p_org and mode = p_mode and quota = p_quota and period_start = v_period for update;
          v_left := case when p_included < 0 then null else greatest(0, p_included - v_used) end;
          foreach u in array p_units loop
            exit when v_left is not null and u > v_left;
            v_n := v_n + 1;
            v_taken := v_taken + u;
            if v_left is not null then v_left := v_left - u; end if;
          end loop;
          if v_taken > 0 then
            update billing_pool_usage set used = used + v_taken where organization_id = p_org and mode = p_mode and quota = p_quota and period_start = v_period;
          end if;
          return v_n;
        end $$;

      create function credits_debit_pooled(p_orgs text[], p_modes text[], p_amounts bigint[], p_units bigint[], p_included bigint[], p_now timestamptz) returns int[]
      language plpgsql as $$
        declare g record; v_pooled int; v_total bigint; charged int[] := '{}';
        begin
          for g in
            select o, m, max(inc) as inc, array_agg(u order by i) as units, array_agg(a order by i) as amounts, array_agg(i order by i) as idx
              from unnest(p_orgs, p_modes, p_amounts, p_units, p_included) with ordinality as x(o, m, a, u, inc, i)
             group by o, m order by o, m
          loop
            v_pooled := credits_take_pool(g.o, g.m, 'messages', g.units, g.inc);
            v_total := 0;
            for k in v_pooled + 1 .. coalesce(array_length(g.idx, 1), 0) loop
              v_total := v_total + g.amounts[k];
              charged := charged || g.idx[k]::int;
            end loop;
            if v_total > 0 or v_pooled < coalesce(array_length(g.idx, 1), 0) then
              update billing_accounts set balance = balance - v_total, updated_at = p_now
               where organization_id = g.o and mode = g.m and balance >= v_total and status not in ('cancelled', 'paused');
              if not found then
                raise exception 'the credit balance of % (%) does not cover %', g.o, g.m, v_total using errcode = 'P0402';
              end if;
            end if;
          end loop;
          return charged;
        end $$;
    `);
  }

  override down(): void {
    this.addSql('drop function credits_debit_pooled(text[], text[], bigint[], bigint[], bigint[], timestamptz);');
    this.addSql('drop function credits_take_pool(text, text, text, bigint[], bigint);');
    this.addSql('drop table billing_pool_usage;');
  }
}
