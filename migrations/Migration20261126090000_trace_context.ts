import { Migration } from '@mikro-orm/migrations';

/**
 * Trace context through the outbox: with tracing on, an event row keeps the W3C `traceparent` of
 * the request or job that emitted it, and each webhook delivery made from it keeps it too, so the
 * delivery attempt continues that trace and sends it on (platform/tracing.ts). Null when tracing is off.
 */
export class Migration20261126090000_trace_context extends Migration {
  override up(): void {
    this.addSql('alter table events add column trace_parent text');
    this.addSql('alter table webhook_deliveries add column trace_parent text');
  }
}
