/**
 * GET /docs (the API reference page, served from the installed @scalar/api-reference) in a real
 * headless Chromium, and GET /docs/errors, which every error's `meta.docs_url` links to.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declaredErrorCodes } from '../src/platform/errors.ts';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { hasChromium, noteMissingChromium, useChromium } from './helpers/browser.ts';

noteMissingChromium('test/docs.test.ts');

let t: TestApp;
beforeAll(async () => { t = await startTestApp({ clock: systemClock }); });
afterAll(async () => { await t?.close(); });

describe('/docs/errors', () => {
  it('lists every error code with its status, under the anchor docs_url names', async () => {
    const r = await fetch(`${t.baseUrl}/docs/errors`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/html');
    const html = await r.text();
    for (const [code, { status }] of declaredErrorCodes()) {
      expect(html).toContain(`<tr id="${code.toLowerCase()}"><td><a href="#${code.toLowerCase()}"><code>${code}</code></a></td><td>${status}</td>`);
    }
  });

  it('is where an error response points', async () => {
    const r = await t.rest('GET', '/v1/settings/organization');
    expect(r.status).toBe(401);
    const docsUrl = new URL(r.body.meta.docs_url);
    expect(docsUrl.pathname).toBe('/docs/errors');
    expect(docsUrl.hash).toBe('#unauthorized');
    const page = await (await fetch(`${t.baseUrl}${docsUrl.pathname}`)).text();
    expect(page).toContain(`id="${docsUrl.hash.slice(1)}"`);
  });
});

describe('/docs', () => {
  it('serves the reference page and its script from this service, no CDN', async () => {
    const html = await (await fetch(`${t.baseUrl}/docs`)).text();
    const scripts = [...html.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]);
    expect(scripts).toEqual(['/docs/assets/api-reference.js']);
    const js = await fetch(`${t.baseUrl}/docs/assets/api-reference.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toContain('javascript');
    expect((await js.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000);
  });

  describe.skipIf(!hasChromium)('in headless Chromium', () => {
    const browser = useChromium();

    it('renders the reference with the messaging operations, loading nothing from another host', async () => {
      const page = await browser().newPage();
      const elsewhere: string[] = [];
      const origin = new URL(t.baseUrl).origin;
      page.on('request', (req) => {
        const url = req.url();
        if (/^https?:/.test(url) && new URL(url).origin !== origin) elsewhere.push(url);
      });
      await page.goto(`${t.baseUrl}/docs`, { waitUntil: 'load' });
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      // The sidebar lists one group per tag; the messaging operations show once its group is opened.
      const fail = async (e: unknown) => {
        throw new Error(`${String(e)}\npage errors: ${errors.join('\n')}\npage text: ${(await page.locator('body').innerText()).slice(0, 1500)}`);
      };
      await page.getByText('messages', { exact: true }).first().click({ timeout: 30_000 }).catch(fail);
      await page.getByText('Send Sms').first().waitFor({ timeout: 30_000 }).catch(async (e: unknown) => {
        throw new Error(`${String(e)}\npage errors: ${errors.join('\n')}\npage text: ${(await page.locator('body').innerText()).slice(0, 1000)}`);
      });
      const text = await page.locator('body').innerText();
      for (const op of ['Send Sms', 'Send Email', 'List Messages', 'Get Message']) expect(text).toContain(op);
      expect(text).toContain('/v1/messages/sms');
      // Scalar's cloud features need scalar.com and an account: none is offered on this page.
      for (const feature of ['Ask AI', 'Generate MCP', 'Deploy', 'Share', 'Developer Tools']) {
        expect(await page.getByRole('button', { name: feature, exact: true }).count(), feature).toBe(0);
        expect(await page.getByRole('link', { name: feature, exact: true }).count(), feature).toBe(0);
      }
      expect(text).not.toContain('Ask AI');
      expect(text).not.toContain('Generate MCP');
      expect(elsewhere).toEqual([]);
      await page.close();
    }, 90_000);

    it('a request sent from the page with a pasted test key reaches the service and its answer shows', async () => {
      const org = await t.createOrg('growth', 'Docs try-it');
      const agent = await t.rest('POST', '/v1/agents', { key: org.testKey, body: { name: 'Front desk', type: 'conversational', model: 'sandbox-1', system_prompt: 'Greet.' } });
      expect(agent.status, agent.text).toBe(201);
      const page = await browser().newPage();
      const sent: { url: string; key: string | undefined; status?: number }[] = [];
      page.on('response', (res) => {
        const url = new URL(res.url());
        if (url.pathname === '/v1/agents') sent.push({ url: url.pathname, key: res.request().headers()['x-api-key'], status: res.status() });
      });
      await page.goto(`${t.baseUrl}/docs`, { waitUntil: 'load' });
      // The page's Authentication panel (ApiKey: X-API-Key), then the first operation's "Test Request" and its Send.
      await page.getByText('agents', { exact: true }).first().click({ timeout: 30_000 });
      await page.locator('input[placeholder="svc_test_sk_…"]').first().fill(org.testKey, { timeout: 30_000 });
      // On a loaded machine the first click could land before the page handled clicks, and the
      // request panel never opened (a full suite run, session 15): click again while Send is not shown.
      const send = page.getByRole('button', { name: /^Send/i }).first();
      for (let tries = 0; !(await send.isVisible()); tries++) {
        if (tries === 6) throw new Error('the request panel did not open');
        await page.getByRole('button', { name: /Test Request/i }).first().click({ timeout: 10_000 }).catch(() => {});
        await send.waitFor({ state: 'visible', timeout: 5_000 }).catch(() => {});
      }
      await send.click({ timeout: 30_000 });
      await expect.poll(() => sent.length, { timeout: 30_000 }).toBeGreaterThan(0);
      expect(sent[0]).toEqual({ url: '/v1/agents', key: org.testKey, status: 200 });
      await expect.poll(async () => (await page.locator('body').innerText()).includes('Front desk'), { timeout: 30_000 }).toBe(true);
      await page.close();
    }, 90_000);
  });
});
