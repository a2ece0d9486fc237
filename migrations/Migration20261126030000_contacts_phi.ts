import { Migration } from '@mikro-orm/migrations';

/**
 * HIPAA mode for contacts: a `phi` column holding a contact's PHI metadata keys sealed (the
 * `metadata` column keeps the unmarked keys, which the search columns and segments read).
 */
export class Migration20261126030000_contacts_phi extends Migration {
  override up(): void {
    this.addSql('alter table contacts add column phi text;');
  }

  override down(): void {
    this.addSql('alter table contacts drop column phi;');
  }
}
