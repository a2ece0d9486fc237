import { Migration } from '@mikro-orm/migrations';

/**
 * Live calls paid by the minute (voice.billing.ts): a call's credit reservation, and captures that
 * keep part of a reservation (the capture entry then gives the rest back: amount ≥ 0, was = 0).
 */
export class Migration20261128010000_calls_credit extends Migration {
  override up(): void {
    this.addSql('alter table calls add column credit_reservation_id text;');
    this.addSql('alter table credit_ledger_entries drop constraint credit_ledger_entries_check;');
    this.addSql(`alter table credit_ledger_entries add constraint credit_ledger_entries_check check (
      (kind in ('topup','release','refund') and amount >= 0) or (kind = 'reservation' and amount <= 0)
      or (kind = 'capture' and amount >= 0) or kind = 'adjustment');`);
  }

  override down(): void {
    this.addSql('alter table credit_ledger_entries drop constraint credit_ledger_entries_check;');
    this.addSql(`alter table credit_ledger_entries add constraint credit_ledger_entries_check check (
      (kind in ('topup','release','refund') and amount >= 0) or (kind = 'reservation' and amount <= 0)
      or (kind = 'capture' and amount = 0) or kind = 'adjustment');`);
    this.addSql('alter table calls drop column credit_reservation_id;');
  }
}
