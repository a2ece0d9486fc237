/** Knowledge files to text (pdf with unpdf, html without markup, csv as one line per row) and text to chunks. */
import { extractText } from 'unpdf';
import type { KnowledgeType } from './agents.model.ts';

export const CHUNK_CHARS = 1000;
const OVERLAP_CHARS = 120;

export async function extractKnowledgeText(type: KnowledgeType, bytes: Uint8Array): Promise<string> {
  if (type === 'pdf') {
    const { text } = await extractText(new Uint8Array(bytes), { mergePages: true });
    return text;
  }
  const raw = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (type === 'html') return htmlToText(raw);
  if (type === 'csv') return csvToText(raw);
  return raw;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

export function htmlToText(html: string): string {
  return html
    .replace(/<(script|style|noscript)[^>]*>[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<(br|\/p|\/div|\/li|\/h[1-6]|\/tr)\b[^>]*>/gi, '\n')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&(#\d+|#x[0-9a-f]+|\w+);/gi, (m, e: string) => {
      if (e.startsWith('#x') || e.startsWith('#X')) return String.fromCodePoint(parseInt(e.slice(2), 16));
      if (e.startsWith('#')) return String.fromCodePoint(Number(e.slice(1)));
      return ENTITIES[e.toLowerCase()] ?? m;
    })
    .replace(/[ \t]+/g, ' ')
    .replace(/\n\s*\n+/g, '\n\n')
    .trim();
}

/** Each row as `header: value; header: value` so a chunk keeps the meaning of its cells. */
export function csvToText(csv: string): string {
  const rows = parseCsv(csv);
  const header = rows.shift() ?? [];
  return rows.map((r) => r.map((v, i) => (header[i] ? `${header[i]}: ${v}` : v)).join('; ')).join('\n');
}

function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field.trim());
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field.trim());
      if (row.some((f) => f !== '')) rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  row.push(field.trim());
  if (row.some((f) => f !== '')) rows.push(row);
  return rows;
}

/**
 * Chunks of about CHUNK_CHARS characters, cut at a paragraph, sentence or word boundary, each
 * starting with the tail of the previous one (OVERLAP_CHARS) so a fact split by a cut is still found.
 */
export function chunkText(text: string): string[] {
  const clean = text.replaceAll('\u0000', '').replace(/[ \t]+/g, ' ').replace(/\n{3,}/g, '\n\n').trim();
  const chunks: string[] = [];
  let start = 0;
  while (start < clean.length) {
    let end = Math.min(clean.length, start + CHUNK_CHARS);
    if (end < clean.length) {
      const window = clean.slice(start + CHUNK_CHARS / 2, end);
      const cut = Math.max(window.lastIndexOf('\n\n'), window.lastIndexOf('. '), window.lastIndexOf('\n'));
      const at = cut >= 0 ? cut : window.lastIndexOf(' ');
      if (at >= 0) end = start + CHUNK_CHARS / 2 + at + 1;
    }
    const chunk = clean.slice(start, end).trim();
    if (chunk) chunks.push(chunk);
    if (end >= clean.length) break;
    start = Math.max(end - OVERLAP_CHARS, start + 1);
    const space = clean.indexOf(' ', start);
    if (space > 0 && space < end) start = space + 1;
  }
  return chunks;
}
