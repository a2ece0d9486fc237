/** Relay connections over the service's keyset pages: forward pagination with the same signed cursors as REST. */
import { ServiceError } from '../platform/errors.ts';
import type { Page } from '../platform/pagination.ts';

export type ConnectionArgs = { first?: number | null; after?: string | null; last?: number | null; before?: string | null };

export function pageRequest(args: ConnectionArgs): { cursor: string | null | undefined; limit: number | null | undefined } {
  if (args.last != null || args.before != null) {
    throw new ServiceError('VALIDATION_ERROR', 'Backward pagination (last/before) is not supported; use first/after', { field: args.last != null ? 'last' : 'before' }, { status: 400 });
  }
  return { cursor: args.after, limit: args.first };
}

export function toConnection<T extends { id: string }>(page: Page<T>) {
  const edges = page.items.map((node) => ({ node, cursor: page.cursorFor(node.id) }));
  return {
    edges,
    pageInfo: {
      hasNextPage: page.hasMore,
      hasPreviousPage: false,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: page.nextCursor ?? edges[edges.length - 1]?.cursor ?? null,
    },
  };
}
