import { Migration } from '@mikro-orm/migrations';

/**
 * The group commit's debit (`credits_debit_pooled`, messaging's accepted sends) marks the account
 * for auto-reload as every other debit does: the update that takes the balance below the
 * threshold sets `auto_reload_token` when no mark is set. It leaves `auto_reload_token_at` null (no
 * job yet): the statement cannot enqueue, so the billing context enqueues the reload once the
 * statement committed (credits.topups.ts `enqueueDebitMarks`), and the minute's sweeper takes any
 * mark left without a job. Until now only the sweeper reloaded after message sends.
 */
export class Migration20261201043000_pooled_debit_auto_reload extends Migration {
  override up(): void {
    this.addSql(`
      create or replace function credits_debit_pooled(p_orgs text[], p_modes text[], p_amounts bigint[], p_units bigint[], p_included bigint[], p_now timestamptz) returns int[]
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
              update billing_accounts set balance = balance - v_total, updated_at = p_now,
                auto_reload_token = case when auto_reload_token is null and auto_reload_enabled and balance - v_total < auto_reload_threshold
                  then 'dp_' || substr(md5(random()::text || clock_timestamp()::text || g.o || g.m), 1, 16) else auto_reload_token end,
                auto_reload_token_at = case when auto_reload_token is null and auto_reload_enabled and balance - v_total < auto_reload_threshold
                  then null else auto_reload_token_at end
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
    this.addSql(`
      create or replace function credits_debit_pooled(p_orgs text[], p_modes text[], p_amounts bigint[], p_units bigint[], p_included bigint[], p_now timestamptz) returns int[]
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
}
