/**
 * GET /graphql in a browser: GraphiQL opens with the example query and the headers template
 * (`X-API-Key: svc_test_sk_…`), sends nothing on its own (every request to /graphql needs a
 * credential: an introspection before the key is pasted could only answer 401; the schema comes
 * with the page), and runs the query once a real test key is pasted. Headless Chromium, as /docs.
 */
import http from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pickEncoding } from '../src/http/graphiqlPage.ts';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { hasChromium, noteMissingChromium, useChromium } from './helpers/browser.ts';

noteMissingChromium('test/graphiql.test.ts');

let t: TestApp;
beforeAll(async () => { t = await startTestApp({ clock: systemClock }); });
afterAll(async () => { await t?.close(); });

describe('GraphiQL at /graphql', () => {
  it('is served to a browser without a credential, with the example query, the headers template and the schema', async () => {
    const r = await fetch(`${t.baseUrl}/graphql`, { headers: { Accept: 'text/html' } });
    expect(r.status).toBe(200);
    const html = await r.text();
    for (const part of ['query Start', 'X-API-Key', 'svc_test_sk_…', '"__schema"']) expect(html.includes(part), part).toBe(true);
  });

  it('is sent compressed (brotli, else gzip), once rendered, and a reload with its ETag is a 304', async () => {
    // Raw bytes as they go over the wire (fetch would decompress them).
    const get = (headers: Record<string, string>) => new Promise<{ status: number; headers: http.IncomingHttpHeaders; bytes: Buffer }>((resolve, reject) => {
      http.get(`${t.baseUrl}/graphql`, { headers: { Accept: 'text/html', ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(chunks) }));
      }).on('error', reject);
    });
    const plain = await get({});
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const html = plain.bytes.toString('utf8');
    // The renderer's own favicon (a 150 KB data URL, inlined twice) is replaced by a small one.
    expect(html).not.toContain('data:image/x-icon;base64,AAABAAYAAAAAAAEAIABiNgAA');
    expect(html).toContain('data:image/svg+xml');
    const br = await get({ 'Accept-Encoding': 'gzip, deflate, br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(zlib.brotliDecompressSync(br.bytes).toString('utf8')).toBe(html);
    expect(br.bytes.length).toBeLessThan(plain.bytes.length / 4);
    const gz = await get({ 'Accept-Encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(gz.bytes).toString('utf8')).toBe(html);
    expect(gz.headers.vary).toBe('Accept-Encoding');
    const etag = plain.headers.etag!;
    expect(etag).toMatch(/^"[\w-]+"$/);
    expect(br.headers.etag).toBe(etag);
    const again = await get({ 'If-None-Match': etag, 'Accept-Encoding': 'br' });
    expect(again.status).toBe(304);
    expect(again.bytes.length).toBe(0);
    process.stdout.write(`GraphiQL page: ${plain.bytes.length} bytes, ${br.bytes.length} brotli, ${gz.bytes.length} gzip\n`);
  }, 60_000);

  it('takes br or gzip as the client lists them, q=0 refusing one', () => {
    expect(pickEncoding('gzip, deflate, br')).toBe('br');
    expect(pickEncoding('br;q=0, gzip')).toBe('gzip');
    expect(pickEncoding('identity')).toBeNull();
    expect(pickEncoding(undefined)).toBeNull();
    expect(pickEncoding('*')).toBe('gzip');
  });

  describe.skipIf(!hasChromium)('in headless Chromium', () => {
    const browser = useChromium();

    it('opens with the query and headers, sends nothing until run, then answers with a pasted key', async () => {
      const org = await t.createOrg('growth', 'GraphiQL');
      const page = await browser().newPage();
      const sent: { method: string; status: number; key: string | undefined }[] = [];
      page.on('response', (res) => {
        if (new URL(res.url()).pathname === '/graphql' && res.request().method() !== 'GET') {
          sent.push({ method: res.request().method(), status: res.status(), key: res.request().headers()['x-api-key'] });
        }
      });
      await page.goto(`${t.baseUrl}/graphql`, { waitUntil: 'load' });
      await page.getByText('query Start').first().waitFor({ timeout: 30_000 });
      // The headers editor is open with the template.
      await expect.poll(async () => (await page.locator('body').innerText()).includes('svc_test_sk_…'), { timeout: 30_000 }).toBe(true);
      expect(await page.locator('body').innerText()).toContain('X-API-Key');
      // Nothing was sent on opening (no introspection that could only be refused).
      await new Promise((r) => setTimeout(r, 2_000));
      expect(sent).toEqual([]);
      // Paste the key into the headers editor and run the query.
      const headers = page.locator('.graphiql-editor-tool .monaco-editor').last();
      await headers.click();
      await page.keyboard.press('Control+A');
      await page.keyboard.insertText(JSON.stringify({ 'X-API-Key': org.testKey }));
      // The editor closes brackets and quotes on its own: drop what it added after the cursor.
      await page.keyboard.press('Shift+End');
      await page.keyboard.press('Delete');
      await page.locator('.graphiql-execute-button').first().click();
      await expect.poll(() => sent.length, { timeout: 30_000 }).toBeGreaterThan(0);
      expect(sent[0]).toEqual({ method: 'POST', status: 200, key: org.testKey });
      // The answer shows: the organization of the pasted key.
      // (The result editor renders spaces as non-breaking ones: \s matches both.)
      await expect.poll(async () => /"name":\s+"GraphiQL"/.test(await page.locator('body').innerText()), { timeout: 30_000 }).toBe(true)
        .catch(async (e: unknown) => { throw new Error(`${String(e)}\npage text: ${(await page.locator('body').innerText()).slice(-1200)}`); });
      await page.close();
    }, 90_000);
  });
});
