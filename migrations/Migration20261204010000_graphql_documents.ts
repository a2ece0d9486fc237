import { Migration } from '@mikro-orm/migrations';

/**
 * GraphQL persisted operations (src/graphql/persisted.ts): the documents an organization's clients
 * may name by id instead of sending their text. `trusted` ones an owner uploaded (the manifest the
 * graphql-codegen client preset emits); `apq` ones a client registered with Automatic Persisted
 * Queries (id = sha256 of the text). `organizations.graphql_trusted_documents_only` makes /graphql
 * accept only trusted ids.
 */
export class Migration20261204010000_graphql_documents extends Migration {
  override up(): void {
    this.addSql(`
      alter table organizations add column graphql_trusted_documents_only boolean not null default false;
      create table graphql_documents (
        organization_id text not null references organizations(id) on delete cascade,
        id text not null,
        document text not null,
        source text not null check (source in ('trusted','apq')),
        created_at timestamptz not null default now(),
        primary key (organization_id, id)
      );
    `);
  }

  override down(): void {
    this.addSql(`
      drop table graphql_documents;
      alter table organizations drop column graphql_trusted_documents_only;
    `);
  }
}
