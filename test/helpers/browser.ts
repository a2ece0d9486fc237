/**
 * Debian's headless Chromium, driven by playwright-core, for the pages this service serves to
 * people (/docs, GraphiQL at /graphql, the sandbox checkout page). `npm test` installs it
 * (scripts/test-peers.txt); without it the browser tests are skipped with a note.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll } from 'vitest';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

/** Notes on stderr, once per file, that `what` is skipped for want of Chromium. */
export function noteMissingChromium(file: string, what = 'the browser test'): void {
  if (!hasChromium) process.stderr.write(`${file}: no ${CHROMIUM} (apt-get install -y chromium): ${what} is skipped\n`);
}

/**
 * In a describe block: Chromium starts before its tests and closes after them, with the flags a
 * closed network needs (no background networking, no component updates, no sync).
 */
export function useChromium(): () => Browser {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  });
  afterAll(async () => { await browser?.close(); });
  return () => {
    if (!browser) throw new Error('Chromium is not running: call useChromium() inside the describe block whose tests use it');
    return browser;
  };
}
