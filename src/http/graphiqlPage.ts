/**
 * GraphiQL's page (GET /graphql from a browser) sent lighter: the page is the same for the whole
 * life of the process (the renderer inlines its scripts, styles and workers, about 9 MB, and the
 * schema), so it is compressed once per encoding (brotli, else gzip, by the request's
 * `Accept-Encoding`; off the event loop) and revalidated by its ETag (304 on a reload).
 */
import { createHash } from 'node:crypto';
import type http from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { HttpResult } from '../rest/envelope.ts';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

type Page = { body: string; etag: string; encoded: Map<string, Promise<Buffer>> };
let current: Page | undefined;

function pageOf(body: string): Page {
  if (current?.body === body) return current;
  current = { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`, encoded: new Map() };
  return current;
}

/** The encoding to send: br when the client takes it, else gzip, else none (q=0 refuses one). */
export function pickEncoding(acceptEncoding: string | undefined): 'br' | 'gzip' | null {
  const taken = new Set((acceptEncoding ?? '').split(',').map((part) => part.trim().toLowerCase())
    .filter((part) => part && !/;\s*q=0(\.0*)?$/.test(part)).map((part) => part.split(';')[0]!.trim()));
  if (taken.has('br')) return 'br';
  if (taken.has('gzip') || taken.has('*')) return 'gzip';
  return null;
}

/** GraphiQL's 200 HTML answer as it goes out: compressed when the client takes it, 304 when its copy is current. */
export async function graphiqlAnswer(req: http.IncomingMessage, result: HttpResult): Promise<HttpResult> {
  if (result.status !== 200 || typeof result.body !== 'string') return result;
  const page = pageOf(result.body);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(result.headers ?? {})) if (k.toLowerCase() !== 'content-length') headers[k] = v;
  headers.ETag = page.etag;
  headers.Vary = 'Accept-Encoding';
  headers['Cache-Control'] = 'no-cache';
  if (req.headers['if-none-match'] === page.etag) return { status: 304, headers, body: '' };
  const encoding = pickEncoding(req.headers['accept-encoding'] as string | undefined);
  if (!encoding) return { ...result, headers };
  let encoded = page.encoded.get(encoding);
  if (!encoded) {
    const input = Buffer.from(page.body);
    encoded = encoding === 'br'
      ? brotli(input, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 6, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: input.length } })
      : gzip(input, { level: 6 });
    page.encoded.set(encoding, encoded);
    encoded.catch(() => page.encoded.delete(encoding));
  }
  const bytes = await encoded;
  return { status: 200, headers: { ...headers, 'Content-Encoding': encoding, 'Content-Length': String(bytes.length) }, body: bytes };
}
