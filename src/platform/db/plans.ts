/**
 * Plans of named (prepared) statements. PostgreSQL plans a named statement's first five executions
 * with their parameter values (custom plans), then keeps one generic plan only when its estimated
 * cost is no worse than theirs. A batched statement that reads its rows from `unnest($1::text[])`
 * never gets there: with the values known, the planner estimates the array's real length (one or
 * two rows), without them ten, so the generic plan always looks dearer and every execution is
 * planned again. In the soak at 566/s (session 12) the named consent check spent 13.3 s planning
 * against 1.6 s executing per 10 minutes (pg_prepared_statements: 0 generic, every plan custom).
 *
 * Reading each array through a sub-select (`unnest((select $1::text[]))`) hides the value from the
 * estimate in both plans alike (an init plan, evaluated once per execution): the costs match, and
 * from the sixth execution on the statement runs its generic plan without planning. Use it only
 * where one plan suits every batch size (index lookups per row), which is what these statements do.
 */
export function genericArrays(casts: readonly string[]): string {
  return casts.map((c) => `(select ${c})`).join(', ');
}
