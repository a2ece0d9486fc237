import { Migration } from '@mikro-orm/migrations';

/**
 * `credits_debit_batch`: debits several tenants' balances for a group of paid sends in one call,
 * each only when its balance covers its total (and its subscription is not cancelled or paused),
 * raising `P0402` otherwise so the whole statement that calls it rolls back. Messaging's group
 * commit calls it from the reservation CTE the billing context hands it (CreditsPort.sendReservations),
 * so a batch's reservations and messages are one statement.
 */
export class Migration20261126100000_credits_debit_batch extends Migration {
  override up(): void {
    this.addSql(`
      create function credits_debit_batch(p_orgs text[], p_modes text[], p_amounts bigint[], p_now timestamptz) returns boolean
      language plpgsql as $$
        declare g record;
        begin
          for g in select o, m, sum(a) as total from unnest(p_orgs, p_modes, p_amounts) as x(o, m, a) group by o, m order by o, m loop
            update billing_accounts set balance = balance - g.total, updated_at = p_now
             where organization_id = g.o and mode = g.m and balance >= g.total and status not in ('cancelled', 'paused');
            if not found then
              raise exception 'the credit balance of % (%) does not cover %', g.o, g.m, g.total using errcode = 'P0402';
            end if;
          end loop;
          return true;
        end $$;
    `);
  }

  override down(): void {
    this.addSql('drop function credits_debit_batch(text[], text[], bigint[], timestamptz);');
  }
}
