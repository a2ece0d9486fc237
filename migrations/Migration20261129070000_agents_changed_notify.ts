import { Migration } from '@mikro-orm/migrations';

/**
 * Every statement that changes or removes agents NOTIFYs `agents_changed` with the ids it touched
 * (comma-separated; `*` past 200 rows and for TRUNCATE), delivered at commit: each instance drops
 * those agents from its cache of agents as chat turns read them (src/modules/agents/agents.cache.ts),
 * whichever process or path made the change.
 */
export class Migration20261129070000_agents_changed_notify extends Migration {
  override up(): void {
    this.addSql(`
      create function agents_changed_notify() returns trigger language plpgsql as $$
      declare ids text;
      begin
        if tg_op = 'TRUNCATE' then
          perform pg_notify('agents_changed', '*');
          return null;
        end if;
        select case when count(*) > 200 then '*' else string_agg(id, ',') end into ids from changed;
        if ids is not null then perform pg_notify('agents_changed', ids); end if;
        return null;
      end $$;
      create trigger agents_changed_update after update on agents referencing old table as changed
        for each statement execute function agents_changed_notify();
      create trigger agents_changed_delete after delete on agents referencing old table as changed
        for each statement execute function agents_changed_notify();
      create trigger agents_changed_truncate after truncate on agents
        for each statement execute function agents_changed_notify();
    `);
  }

  override down(): void {
    this.addSql(`
      drop trigger agents_changed_truncate on agents;
      drop trigger agents_changed_delete on agents;
      drop trigger agents_changed_update on agents;
      drop function agents_changed_notify();
    `);
  }
}
