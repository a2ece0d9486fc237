/** The invoice document: a PDF made with pdfkit, dated with the invoice (the same invoice renders the same bytes). */
import type { InvoiceLine } from './billing.entities.ts';

export type InvoiceDocument = {
  number: string;
  organizationId: string;
  mode: string;
  periodStart: Date;
  periodEnd: Date;
  createdAt: Date;
  currency: string;
  amount: number;
  status: string;
  lines: readonly InvoiceLine[];
};

export function money(minor: number, currency: string): string {
  return `${(minor / 100).toFixed(2)} ${currency.toUpperCase()}`;
}

/** pdfkit is loaded on first use (its fonts and layout engine cost ~0.2–0.7 s at start). */
const loadPdfkit = () => import('pdfkit');
let pdfkit: ReturnType<typeof loadPdfkit> | undefined;

export async function renderInvoicePdf(inv: InvoiceDocument): Promise<Buffer> {
  const { default: PDFDocument } = await (pdfkit ??= loadPdfkit());
  const doc = new PDFDocument({
    size: 'A4', margin: 50, compress: true,
    info: { Title: `Invoice ${inv.number}`, Author: 'Omnichannel', CreationDate: inv.createdAt, ModDate: inv.createdAt },
  });
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('data', (c: Buffer) => chunks.push(c));
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });
  const day = (d: Date) => d.toISOString().slice(0, 10);
  doc.fontSize(20).text(`Invoice ${inv.number}`);
  doc.moveDown(0.5).fontSize(10)
    .text(`Organization: ${inv.organizationId}${inv.mode === 'test' ? ' (test mode)' : ''}`)
    .text(`Billing period: ${day(inv.periodStart)} to ${day(inv.periodEnd)}`)
    .text(`Issued: ${day(inv.createdAt)}`)
    .text(`Status: ${inv.status}`);
  doc.moveDown();
  doc.fontSize(11).text('Description', 50, doc.y, { continued: true, width: 300 }).text('Amount', { align: 'right' });
  doc.moveDown(0.3);
  for (const line of inv.lines) {
    const qty = line.quantity === 1 ? '' : ` (${line.quantity} x ${money(line.unit_amount, inv.currency)})`;
    doc.fontSize(10).text(`${line.description}${qty}`, 50, doc.y, { continued: true, width: 300 }).text(money(line.amount, inv.currency), { align: 'right' });
  }
  doc.moveDown();
  doc.fontSize(12).text(`Total: ${money(inv.amount, inv.currency)}`, { align: 'right' });
  doc.end();
  return done;
}
