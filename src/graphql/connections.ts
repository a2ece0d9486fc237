/**
 * Relay connections over the service's keyset pages, with the same signed cursors as REST: forward
 * (`first`/`after`) and backward (`last`/`before`), edges newest first either way.
 */
import { ServiceError } from '../platform/errors.ts';
import type { Page, PageRequest } from '../platform/pagination.ts';

export type ConnectionArgs = { first?: number | null; after?: string | null; last?: number | null; before?: string | null };

export function pageRequest(args: ConnectionArgs): PageRequest {
  const backward = args.last != null || args.before != null;
  if (backward && (args.first != null || args.after != null)) {
    throw new ServiceError('VALIDATION_ERROR', 'Page one way at a time: first/after or last/before', { field: args.first != null ? 'first' : 'after' }, { status: 400 });
  }
  return backward ? { before: args.before, limit: args.last, backward: true } : { cursor: args.after, limit: args.first };
}

export function toConnection<T extends { id: string }>(page: Page<T>) {
  const edges = page.items.map((node) => ({ node, cursor: page.cursorFor(node.id) }));
  return {
    edges,
    pageInfo: {
      hasNextPage: page.hasMore,
      hasPreviousPage: page.hasPrevious,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: page.nextCursor ?? edges[edges.length - 1]?.cursor ?? null,
    },
  };
}
