import { Migration } from '@mikro-orm/migrations';

/**
 * Live calls take their minutes from the plan's included voice minutes first (voice.billing.ts):
 * the minutes a call took from its billing period's pool when it was placed; what it did not use
 * goes back when it ends.
 */
export class Migration20261128030000_calls_pool extends Migration {
  override up(): void {
    this.addSql('alter table calls add column pool_minutes integer not null default 0, add column pool_period timestamptz;');
  }

  override down(): void {
    this.addSql('alter table calls drop column pool_minutes, drop column pool_period;');
  }
}
