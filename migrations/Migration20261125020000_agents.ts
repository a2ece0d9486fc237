import { Migration } from '@mikro-orm/migrations';

/**
 * Agents: agents, conversations, agent messages, knowledge documents and their full-text chunks
 * (tsvector + GIN, ranked with ts_rank_cd), marketplace listings. No foreign key to organizations
 * on the hot tables (conversations, messages, chunks), as for the other hot tables.
 */
export class Migration20261125020000_agents extends Migration {
  override up(): void {
    this.addSql(`
      create table agents (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        type text not null check (type in ('conversational','task')),
        model text not null,
        system_prompt text not null,
        description text,
        instructions text,
        tools jsonb not null default '[]',
        channels jsonb not null default '[]',
        guardrails jsonb not null default '{}',
        knowledge_base_ids jsonb not null default '[]',
        temperature double precision not null check (temperature between 0 and 2),
        max_tokens integer not null check (max_tokens > 0),
        status text not null check (status in ('draft','active','paused','error')),
        error_reason text,
        deployed_channels jsonb not null default '[]',
        bound_number text,
        bound_number_id text,
        deployed_at timestamptz,
        tool_secret_sealed text not null,
        template_id text,
        version integer not null default 1,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index agents_org_idx on agents (organization_id, mode, id desc);
      create index agents_status_idx on agents (organization_id, mode, status, id desc);

      create table agent_conversations (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        agent_id text not null,
        status text not null check (status in ('active','completed','abandoned')),
        channel text not null,
        contact_address text,
        context jsonb not null default '{}',
        turns integer not null default 0,
        handoff boolean not null default false,
        ended_reason text,
        last_message_at timestamptz not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        ended_at timestamptz
      );
      create index agent_conversations_agent_idx on agent_conversations (organization_id, mode, agent_id, id desc);
      create index agent_conversations_idle_idx on agent_conversations (last_message_at) where status = 'active';
      create index agent_conversations_contact_idx on agent_conversations (organization_id, mode, agent_id, channel, contact_address) where status = 'active';

      create table agent_messages (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        conversation_id text not null,
        agent_id text not null,
        role text not null check (role in ('user','assistant')),
        content text not null,
        tool_calls jsonb not null default '[]',
        guardrails jsonb not null default '[]',
        tokens_input integer not null default 0,
        tokens_output integer not null default 0,
        latency_ms integer,
        partial boolean not null default false,
        created_at timestamptz not null
      );
      create index agent_messages_conversation_idx on agent_messages (organization_id, mode, conversation_id, id desc);

      create table agent_knowledge_documents (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        agent_id text not null,
        filename text not null,
        type text not null check (type in ('pdf','txt','md','html','csv')),
        bytes integer not null,
        chunks integer not null,
        characters integer not null,
        created_at timestamptz not null
      );
      create index agent_knowledge_documents_org_idx on agent_knowledge_documents (organization_id, mode, id desc);

      create table agent_knowledge_chunks (
        id bigint generated always as identity primary key,
        organization_id text not null,
        mode text not null,
        document_id text not null,
        ordinal integer not null,
        content text not null,
        tsv tsvector generated always as (to_tsvector('english', content)) stored
      );
      create index agent_knowledge_chunks_tsv_idx on agent_knowledge_chunks using gin (tsv);
      create index agent_knowledge_chunks_doc_idx on agent_knowledge_chunks (document_id, ordinal);

      create table agent_marketplace_listings (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        agent_id text not null,
        title text not null,
        description text not null,
        category text not null,
        pricing jsonb not null default '{}',
        status text not null check (status in ('pending_review','approved','rejected')),
        review_note text,
        snapshot jsonb not null,
        created_at timestamptz not null,
        reviewed_at timestamptz
      );
      create index agent_marketplace_listings_org_idx on agent_marketplace_listings (organization_id, mode, id desc);
      create index agent_marketplace_listings_approved_idx on agent_marketplace_listings (mode, id desc) where status = 'approved';
    `);
  }
}
