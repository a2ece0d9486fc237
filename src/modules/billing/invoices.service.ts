/**
 * Billing periods and invoices. The period job closes every period that has ended: one
 * compare-and-set on the account's period (only the instance that moves it from [start, end) to the
 * next month wins; `unique (organization_id, mode, period_start)` on invoices backs it up) writes,
 * in that same transaction, the invoice with its line items (plan fee, overage, top-ups), its
 * numbered PDF (immutable: a trigger refuses changes) and the `invoice.created` event.
 */
import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Clock } from '../../platform/clock.ts';
import { notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { addMonth } from '../../providers/payments/types.ts';
import { Invoice, type InvoiceLine } from './billing.entities.ts';
import { CURRENCY, planById, planFeeMinor, priceOf } from './billing.plans.ts';
import { renderInvoicePdf } from './invoice.pdf.ts';
import type { ListInvoicesInput } from './billing.schemas.ts';
import type { UsageService } from './usage.service.ts';

export const CLOSE_PERIODS_JOB = 'billing.close-periods';

type DueAccount = { organization_id: string; mode: 'live' | 'test'; start_ms: string; end_ms: string };

export class InvoicesService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #usage: UsageService;

  constructor(deps: { orm: MikroORM; clock: Clock; cursors: CursorCodec; usage: UsageService }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#usage = deps.usage;
  }

  /** Closes every ended period (all tenants); returns how many invoices this call created. */
  async closeDuePeriods(limit = 500): Promise<number> {
    const due = await sqlQuery<DueAccount>(sqlClient(this.#orm), `
      select organization_id, mode, (extract(epoch from current_period_start) * 1000)::bigint::text as start_ms,
        (extract(epoch from current_period_end) * 1000)::bigint::text as end_ms
      from billing_accounts where current_period_end <= $1 order by current_period_end limit $2`, [this.#clock.now(), limit]);
    let created = 0;
    for (const a of due) {
      if (await this.closePeriod({ organizationId: a.organization_id, mode: a.mode }, new Date(Number(a.start_ms)), new Date(Number(a.end_ms)))) created++;
    }
    return created;
  }

  /** Closes [start, end) of one account if it is still its current period; returns the invoice id, or null when another run did. */
  async closePeriod(tenant: TenantRef, start: Date, end: Date): Promise<string | null> {
    const totals = await this.#usage.totals(tenant, start, end);
    const now = this.#clock.now();
    return tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const db = tx.getTransactionContext() as Transaction<unknown>;
      const [moved] = await sqlQuery<{ seq: number; plan_id: string; status: string; currency: string; sequence: number }>(db, `
        update billing_accounts set current_period_start = current_period_end, current_period_end = $5, invoice_seq = invoice_seq + 1,
          status = case when cancel_at_period_end then 'cancelled' else status end, updated_at = $6
        where organization_id = $1 and mode = $2 and current_period_start = $3 and current_period_end = $4
        returning invoice_seq as seq, plan_id, status, currency, sequence`,
      [tenant.organizationId, tenant.mode, start, end, addMonth(end), now]);
      if (!moved) return null;
      const plan = planById(moved.plan_id)!;
      const lines: InvoiceLine[] = [];
      if (moved.status !== 'trialing' && planFeeMinor(plan) > 0) {
        lines.push({ kind: 'plan', description: `${plan.name} plan, monthly`, quantity: 1, unit_amount: planFeeMinor(plan), amount: planFeeMinor(plan) });
      }
      const included = plan.features.messages_included;
      const sent = ['sms.segment', 'whatsapp.message', 'email.recipient', 'rcs.message', 'viber.message']
        .reduce((n, k) => n + (totals.get(k)?.quantity ?? 0), 0);
      if (included !== 'unlimited' && sent > included) {
        // Paid from prepaid credits as the messages were sent: listed, not charged again.
        const over = sent - included;
        lines.push({ kind: 'overage', description: `Messages beyond the ${included} included (paid from credits)`, quantity: over, unit_amount: priceOf(plan.id, 'sms.segment', 1), amount: 0 });
      }
      const topups = await sqlQuery<{ amount: string; count: string }>(db, `
        select coalesce(sum(amount), 0)::text as amount, count(*)::text as count from credit_ledger_entries
        where organization_id = $1 and mode = $2 and kind = 'topup' and created_at >= $3 and created_at < $4`, [tenant.organizationId, tenant.mode, start, end]);
      const topped = Number(topups[0]?.amount ?? 0);
      if (topped > 0) lines.push({ kind: 'topup', description: `Credit top-ups (${topups[0]!.count})`, quantity: 1, unit_amount: topped, amount: topped });
      const amount = lines.reduce((n, l) => n + l.amount, 0);
      const id = newId('inv', now.getTime());
      const number = `INV-${tenant.organizationId.slice(-8).toUpperCase()}${tenant.mode === 'test' ? '-T' : ''}-${String(moved.seq).padStart(5, '0')}`;
      const currency = moved.currency || CURRENCY;
      const pdf = await renderInvoicePdf({ number, organizationId: tenant.organizationId, mode: tenant.mode, periodStart: start, periodEnd: end, createdAt: now, currency, amount, status: 'paid', lines });
      await sqlQuery(db, `
        insert into invoices (id, organization_id, mode, number, amount, currency, status, period_start, period_end, lines, pdf, pdf_sha256, created_at)
        values ($1, $2, $3, $4, $5, $6, 'paid', $7, $8, $9, $10, $11, $12)`,
      [id, tenant.organizationId, tenant.mode, number, amount, currency, start, end, JSON.stringify(lines), pdf, createHash('sha256').update(pdf).digest('hex'), now]);
      emitEvent(tx, tenant, {
        type: 'invoice.created', resourceType: 'invoice', resourceId: id, sequence: 1,
        data: { id, number, amount, currency, status: 'paid', period_start: start.toISOString(), period_end: end.toISOString(), pdf_url: invoicePdfPath(id), lines },
      }, now);
      return id;
    });
  }

  list(scope: Scope, input: ListInvoicesInput): Promise<Page<Invoice>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Invoice, scope, { list: 'invoices' }, input);
  }

  async get(scope: Scope, id: string): Promise<Invoice> {
    const inv = await tenantEm(this.#orm, scope).findOne(Invoice, { id });
    if (!inv) throw notFound('Invoice', id);
    return inv;
  }

  /** The stored PDF bytes of an invoice of this tenant (NOT_FOUND otherwise). */
  async pdf(scope: Scope, id: string): Promise<{ number: string; pdf: Buffer }> {
    const [row] = await sqlQuery<{ number: string; pdf: Buffer }>(sqlClient(this.#orm),
      'select number, pdf from invoices where organization_id = $1 and mode = $2 and id = $3', [scope.organizationId, scope.mode, id]);
    if (!row) throw notFound('Invoice', id);
    return row;
  }
}

export function invoicePdfPath(id: string): string {
  return `/v1/billing/invoices/${id}/pdf`;
}
