/** The ordered list of migrations; the migrator runs them by name, so never rename or edit a landed one. */
import { Migration20261122000000_spine } from './Migration20261122000000_spine.ts';
import { Migration20261122010000_messaging } from './Migration20261122010000_messaging.ts';
import { Migration20261122020000_webhooks } from './Migration20261122020000_webhooks.ts';
import { Migration20261122030000_numbers } from './Migration20261122030000_numbers.ts';
import { Migration20261122040000_verify } from './Migration20261122040000_verify.ts';
import { Migration20261122050000_contacts } from './Migration20261122050000_contacts.ts';
import { Migration20261123010000_rate_limit_batches } from './Migration20261123010000_rate_limit_batches.ts';
import { Migration20261123020000_contacts_activity_consent_search } from './Migration20261123020000_contacts_activity_consent_search.ts';
import { Migration20261124010000_hot_rows_without_org_fk } from './Migration20261124010000_hot_rows_without_org_fk.ts';

export const migrationsList = [
  { name: 'Migration20261122000000_spine', class: Migration20261122000000_spine },
  { name: 'Migration20261122010000_messaging', class: Migration20261122010000_messaging },
  { name: 'Migration20261122020000_webhooks', class: Migration20261122020000_webhooks },
  { name: 'Migration20261122030000_numbers', class: Migration20261122030000_numbers },
  { name: 'Migration20261122040000_verify', class: Migration20261122040000_verify },
  { name: 'Migration20261122050000_contacts', class: Migration20261122050000_contacts },
  { name: 'Migration20261123010000_rate_limit_batches', class: Migration20261123010000_rate_limit_batches },
  { name: 'Migration20261123020000_contacts_activity_consent_search', class: Migration20261123020000_contacts_activity_consent_search },
  { name: 'Migration20261124010000_hot_rows_without_org_fk', class: Migration20261124010000_hot_rows_without_org_fk },
];
