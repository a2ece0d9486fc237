import { Migration } from '@mikro-orm/migrations';

/**
 * Rate-limit counters taken for many requests in one round trip (PgCounterStore batches concurrent
 * requests). Request i takes one unit of `first[i]` if it has room and then, only in that case, one of
 * `second[i]` (when given); requests are served in array order, as if they had arrived one by one.
 * Every counter row of the batch is first created or locked in one global order (bucket, window), so
 * two batches running at once (two instances) wait for each other instead of deadlocking.
 */
export class Migration20261123010000_rate_limit_batches extends Migration {
  override up(): void {
    this.addSql(`
      create function rate_limit_take(
        first_bucket text[], first_window bigint[], first_limit integer[], first_expires timestamptz[],
        second_bucket text[], second_window bigint[], second_limit integer[], second_expires timestamptz[]
      ) returns table (idx integer, first_count integer, second_count integer)
      language plpgsql as $$
      declare
        i integer;
        slot record;
        taken integer;
      begin
        for slot in
          select s.b, s.w, max(s.e) as e from (
            select unnest(first_bucket) as b, unnest(first_window) as w, unnest(first_expires) as e
            union all
            select unnest(second_bucket), unnest(second_window), unnest(second_expires)
          ) s where s.b is not null group by s.b, s.w order by s.b, s.w
        loop
          insert into rate_limit_counters as c (bucket, window_start, count, expires_at) values (slot.b, slot.w, 0, slot.e)
          on conflict (bucket, window_start) do update set expires_at = greatest(c.expires_at, excluded.expires_at);
        end loop;
        for i in 1 .. coalesce(array_length(first_bucket, 1), 0) loop
          idx := i;
          first_count := null;
          second_count := null;
          update rate_limit_counters set count = count + 1
            where bucket = first_bucket[i] and window_start = first_window[i] and count < first_limit[i]
            returning count into taken;
          first_count := taken;
          if taken is not null and second_bucket[i] is not null then
            taken := null;
            update rate_limit_counters set count = count + 1
              where bucket = second_bucket[i] and window_start = second_window[i] and count < second_limit[i]
              returning count into taken;
            second_count := taken;
          end if;
          return next;
        end loop;
      end $$;
    `);
  }

  override down(): void {
    this.addSql('drop function rate_limit_take(text[], bigint[], integer[], timestamptz[], text[], bigint[], integer[], timestamptz[]);');
  }
}
