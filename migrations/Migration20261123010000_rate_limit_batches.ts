import { Migration } from '@mikro-orm/migrations';

/**
 * Rate-limit counters taken for many requests in one round trip (PgCounterStore batches concurrent
 * requests). Request i takes one unit of `first[i]` if it has room and then, only in that case, one of
 * `second[i]` (when given); requests are served in array order, as if they had arrived one by one.
 * Every counter row of the batch is first created or locked in one global order (bucket, window), so
 * two batches running at once (two instances) wait for each other instead of deadlocking; the
 * requests are then served in memory and the counters that moved are written in one statement
 * (a few statements per batch, not per request).
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
        slot_keys text[];
        slot_buckets text[];
        slot_windows bigint[];
        slot_expires timestamptz[];
        before integer[];
        counts integer[];
        i integer;
        p integer;
      begin
        -- 1. Create or lock every counter row of the batch, in one global order. A conflicting row is
        --    locked without being rewritten (the WHERE is false unless its expiry moves), then read.
        select array_agg(g.b order by g.b, g.w), array_agg(g.w order by g.b, g.w), array_agg(g.e order by g.b, g.w)
          into slot_buckets, slot_windows, slot_expires
          from (
            select s.b, s.w, max(s.e) as e from (
              select unnest(first_bucket) as b, unnest(first_window) as w, unnest(first_expires) as e
              union all
              select unnest(second_bucket), unnest(second_window), unnest(second_expires)
            ) s where s.b is not null group by s.b, s.w
          ) g;
        insert into rate_limit_counters as c (bucket, window_start, count, expires_at)
          select v.b, v.w, 0, v.e from unnest(slot_buckets, slot_windows, slot_expires) with ordinality as v(b, w, e, n) order by v.n
          on conflict (bucket, window_start) do update set expires_at = excluded.expires_at where c.expires_at < excluded.expires_at;
        select array_agg(c.count order by v.n), array_agg(v.b || chr(31) || v.w order by v.n)
          into before, slot_keys
          from unnest(slot_buckets, slot_windows) with ordinality as v(b, w, n)
          join rate_limit_counters c on c.bucket = v.b and c.window_start = v.w;
        counts := before;
        -- 2. Serve the requests in order, in memory.
        for i in 1 .. coalesce(array_length(first_bucket, 1), 0) loop
          idx := i;
          first_count := null;
          second_count := null;
          p := array_position(slot_keys, first_bucket[i] || chr(31) || first_window[i]);
          if counts[p] < first_limit[i] then
            counts[p] := counts[p] + 1;
            first_count := counts[p];
            if second_bucket[i] is not null then
              p := array_position(slot_keys, second_bucket[i] || chr(31) || second_window[i]);
              if counts[p] < second_limit[i] then
                counts[p] := counts[p] + 1;
                second_count := counts[p];
              end if;
            end if;
          end if;
          return next;
        end loop;
        -- 3. Write the counters that moved, in one statement (their rows are still locked).
        update rate_limit_counters c set count = v.count
          from unnest(slot_buckets, slot_windows, counts, before) as v(b, w, count, before)
          where v.count <> v.before and c.bucket = v.b and c.window_start = v.w;
      end $$;
    `);
  }

  override down(): void {
    this.addSql('drop function rate_limit_take(text[], bigint[], integer[], timestamptz[], text[], bigint[], integer[], timestamptz[]);');
  }
}
