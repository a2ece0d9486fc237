/**
 * Public documentation, no credential needed: `GET /v1/openapi.json` (the OpenAPI 3.1 document of
 * the route table, built once on first request), `GET /docs` (the Scalar API reference, its script
 * served from the installed `@scalar/api-reference`, nothing from a CDN) and `GET /docs/errors`
 * (every error code with its status: what `meta.docs_url` links to, `#<code in lower case>`).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type http from 'node:http';
import { declaredErrorCodes } from '../platform/errors.ts';
import type { RestRoute } from '../rest/route.ts';
import { buildOpenApi } from './openapi.ts';

export const DOCS_PATHS = ['/v1/openapi.json', '/docs', '/docs/', '/docs/errors', '/docs/assets/api-reference.js'] as const;

/** The package's self-contained browser build (`dist/index.js` is resolvable through its exports map; the build sits beside it). */
const SCALAR_SCRIPT = path.join(path.dirname(createRequire(import.meta.url).resolve('@scalar/api-reference')), 'browser/standalone.js');

/**
 * Scalar's API-key field shows a fixed base64 placeholder (no option sets it); the served script
 * shows what a key of this service looks like instead.
 */
const SCALAR_KEY_PLACEHOLDER = 'QUxMIFlPVVIgQkFTRSBBUkUgQkVMT05HIFRPIFVT';
export const API_KEY_PLACEHOLDER = 'svc_test_sk_…';

async function scalarScript(): Promise<Buffer> {
  const source = await readFile(SCALAR_SCRIPT, 'utf8');
  return Buffer.from(source.replaceAll(SCALAR_KEY_PLACEHOLDER, API_KEY_PLACEHOLDER));
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function referencePage(): string {
  // Scalar's cloud features (Ask AI, Generate MCP, the Share/Deploy/Configure toolbar, developer
  // tools) need scalar.com and an account: this page is served offline by the service, so they stay off.
  const config = {
    url: '/v1/openapi.json', withDefaultFonts: false, hideDownloadButton: false, telemetry: false, hideClientButton: false,
    agent: { disabled: true }, mcp: { disabled: true }, showToolbar: 'never', showDeveloperTools: 'never',
  };
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>Omnichannel API reference</title>
</head>
<body>
  <div id="app"></div>
  <script src="/docs/assets/api-reference.js"></script>
  <script>Scalar.createApiReference('#app', ${JSON.stringify(config)});</script>
  <noscript>The reference needs JavaScript; the document itself is <a href="/v1/openapi.json">/v1/openapi.json</a> and the error codes are at <a href="/docs/errors">/docs/errors</a>.</noscript>
</body>
</html>
`;
}

export function errorsPage(): string {
  const rows = [...declaredErrorCodes()].map(([code, { status, message }]) =>
    `<tr id="${code.toLowerCase()}"><td><a href="#${code.toLowerCase()}"><code>${code}</code></a></td><td>${status}</td><td>${escape(message)}</td></tr>`).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <title>Error codes · Omnichannel API</title>
  <style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.35rem .6rem;text-align:left}tr:target{background:#fff3c4}</style>
</head>
<body>
  <h1>Error codes</h1>
  <p>Every error answers <code>{ error: { code, message, status, details }, meta: { request_id, timestamp, docs_url } }</code> (GraphQL: <code>extensions: { code, status, details }</code>).
  <code>VALIDATION_ERROR</code> is 400 for a malformed request and 422 for a field that fails validation. The API reference is at <a href="/docs">/docs</a>.</p>
  <table>
    <thead><tr><th>Code</th><th>HTTP</th><th>Meaning</th></tr></thead>
    <tbody>
${rows}
    </tbody>
  </table>
</body>
</html>
`;
}

/** Answers the documentation paths; returns false for any other path. */
export function createDocs(routes: () => readonly RestRoute[]): (req: http.IncomingMessage, res: http.ServerResponse, pathname: string) => boolean {
  let openapi: string | undefined;
  let script: Promise<Buffer> | undefined;
  const html = (res: http.ServerResponse, body: string) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache' });
    res.end(body);
  };
  return (req, res, pathname) => {
    if (!(DOCS_PATHS as readonly string[]).includes(pathname)) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain' });
      res.end('use GET');
      return true;
    }
    if (pathname === '/v1/openapi.json') {
      openapi ??= JSON.stringify(buildOpenApi(routes()));
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-cache' });
      res.end(openapi);
    } else if (pathname === '/docs/errors') {
      html(res, errorsPage());
    } else if (pathname === '/docs/assets/api-reference.js') {
      script ??= scalarScript();
      script.then((body) => {
        res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=3600' });
        res.end(body);
      }, () => {
        res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end('the @scalar/api-reference package is not installed');
      });
    } else {
      html(res, referencePage());
    }
    return true;
  };
}
