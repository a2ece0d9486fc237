/** Calendar arithmetic of the numbers context: monthly billing cycles and business-day estimates (UTC). */

/** `months` calendar months after `anchor`, on the same day or the month's last day (Jan 31 → Feb 28). */
export function addMonths(anchor: Date, months: number): Date {
  const d = new Date(anchor.getTime());
  const day = d.getUTCDate();
  d.setUTCDate(1);
  d.setUTCMonth(d.getUTCMonth() + months);
  const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  d.setUTCDate(Math.min(day, last));
  return d;
}

/** `days` business days after `from` (Saturdays and Sundays skipped, UTC), at the same time of day. */
export function addBusinessDays(from: Date, days: number): Date {
  const d = new Date(from.getTime());
  let left = days;
  while (left > 0) {
    d.setUTCDate(d.getUTCDate() + 1);
    const dow = d.getUTCDay();
    if (dow !== 0 && dow !== 6) left--;
  }
  return d;
}
