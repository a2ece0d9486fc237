/** Segments: saved rules (compiled to one SQL query, see segments.rules.ts) and their previews. */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type Page } from '../../platform/pagination.ts';
import { Segment, type Contact } from './contacts.entities.ts';
import { COLUMNS, numbered, rowToContact } from './contacts.shared.ts';
import { compileRules } from './segments.rules.ts';
import type { ContactPhi } from './contacts.phi.ts';

export class SegmentsService {
  readonly #orm: MikroORM;
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #phi: ContactPhi;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; phi: ContactPhi }) {
    this.#orm = deps.orm;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#phi = deps.phi;
  }

  /** Compiles rules; in HIPAA mode a condition on a PHI metadata key is VALIDATION_ERROR (see segments.rules.ts). */
  async #compile(scope: Scope, rules: unknown) {
    return compileRules(rules, this.#clock.now(), 'rules', { isPhiKey: await this.#phi.phiKeyTest(scope.organizationId) });
  }

  async createSegment(scope: Scope, input: { name: string; description?: string | null; rules: Record<string, unknown> }): Promise<Segment> {
    await this.#compile(scope, input.rules);
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(Segment, {
      id: newId('seg', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, description: input.description ?? null,
      rules: input.rules, createdAt: now, updatedAt: now,
    }));
  }

  async listSegments(scope: Scope, input: { cursor?: string | null; limit?: number | null }): Promise<Page<Segment>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Segment, scope, { list: 'segments' }, input);
  }

  async getSegment(scope: Scope, id: string): Promise<Segment> {
    const s = await tenantEm(this.#orm, scope).findOne(Segment, { id });
    if (!s) throw notFound('Segment', id);
    return s;
  }

  async updateSegment(scope: Scope, id: string, patch: { name?: string; description?: string | null; rules?: Record<string, unknown> }): Promise<Segment> {
    if (patch.rules !== undefined) await this.#compile(scope, patch.rules);
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const s = await tx.findOne(Segment, { id });
      if (!s) throw notFound('Segment', id);
      if (patch.name !== undefined) s.name = patch.name;
      if (patch.description !== undefined) s.description = patch.description;
      if (patch.rules !== undefined) s.rules = patch.rules;
      s.updatedAt = now;
      return s;
    });
  }

  async deleteSegment(scope: Scope, id: string): Promise<void> {
    const removed = await tenantEm(this.#orm, scope).nativeDelete(Segment, { id });
    if (!removed) throw notFound('Segment', id);
  }

  /** The count and the newest `limit` matching contacts, in one query (a window count over the match). */
  async previewRules(scope: Scope, rules: unknown, limit?: number | null): Promise<{ count: number; contacts: Contact[] }> {
    const n = validateLimit(limit);
    const compiled = await this.#compile(scope, rules);
    const sql = `select ${COLUMNS}, count(*) over () as total from contacts c where c.organization_id = ? and c.mode = ? and ${compiled.sql} order by c.id desc limit ?`;
    const res = await this.#pool.query(numbered(sql), [scope.organizationId, scope.mode, ...compiled.params, n]);
    if (res.rows.length) return { count: Number(res.rows[0].total), contacts: await this.#phi.reveal(scope, res.rows.map(rowToContact), 'contacts.previewSegment') };
    return { count: 0, contacts: [] };
  }

  async previewSegment(scope: Scope, id: string, limit?: number | null): Promise<{ count: number; contacts: Contact[] }> {
    const s = await this.getSegment(scope, id);
    return this.previewRules(scope, s.rules, limit);
  }
}
