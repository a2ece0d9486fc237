/**
 * Knowledge retrieval re-ranked by the live provider's embeddings (LLM_EMBEDDING_MODEL): a local
 * OpenAI-compatible `/embeddings` server stands in for the provider. Live-mode uploads store each
 * chunk's embedding; retrieval takes the full-text candidates and orders them by cosine similarity
 * to the query's embedding, where full text alone orders them differently (test mode, no embedder);
 * an embedding failure at upload indexes for full text only, and retrieval still answers.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

/** The fake model's "meaning": apples (and crispness) one way, pears another, anything else a third. */
const vector = (text: string): number[] => {
  const t = text.toLowerCase();
  if (t.includes('apple') || t.includes('crisp')) return [1, 0, 0.05];
  if (t.includes('pear')) return [0, 1, 0.05];
  return [0, 0, 1];
};

let server: http.Server;
const requests: { input: string[] }[] = [];
let t: TestApp;
let org: TestOrg;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const parsed = JSON.parse(body) as { input: string | string[] };
      const input = Array.isArray(parsed.input) ? parsed.input : [parsed.input];
      requests.push({ input });
      if (req.url !== '/v1/embeddings' || input.some((s) => s.includes('BROKEN'))) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'embedding backend down' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        object: 'list', model: 'fake-embed',
        data: input.map((s, index) => ({ object: 'embedding', index, embedding: vector(s) })),
        usage: { prompt_tokens: input.length, total_tokens: input.length },
      }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t = await startTestApp({
    clock: systemClock,
    env: { LLM_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, LLM_API_KEY: 'k', LLM_EMBEDDING_MODEL: 'fake-embed' },
  });
  org = await t.createOrg('enterprise', 'Orchard');
});
afterAll(async () => {
  await t?.close();
  server?.close();
});

async function agentWithDocs(key: string, docs: Record<string, string>): Promise<string[]> {
  const a = await t.rest('POST', '/v1/agents', { key, body: { name: 'Grocer', type: 'conversational', model: 'm', system_prompt: 'You sell fruit.' } });
  expect(a.status, a.text).toBe(201);
  const ids: string[] = [];
  for (const [filename, text] of Object.entries(docs)) {
    const form = new FormData();
    form.append('file', new Blob([text], { type: 'text/plain' }), filename);
    form.append('type', 'txt');
    const up = await fetch(`${t.baseUrl}/v1/agents/${a.body.data.id}/knowledge`, { method: 'POST', headers: { 'X-API-Key': key }, body: form });
    const body = await up.json();
    expect(up.status, JSON.stringify(body)).toBe(201);
    ids.push(body.data.id);
  }
  return ids;
}

const DOCS = {
  'apples.txt': 'Apple orchard notes: our fruit is picked by hand in autumn.',
  'pears.txt': 'Pear fruit, fruit and more fruit: the fruit stand sells fruit daily.',
};

describe('knowledge embeddings', () => {
  it('live mode: chunks are embedded at upload and retrieval re-ranks the full-text candidates by meaning', async () => {
    const [apples, pears] = await agentWithDocs(org.liveKey, DOCS);
    const { rows } = await t.db.query('select document_id, embedding from agent_knowledge_chunks where document_id = any($1) order by document_id', [[apples, pears]]);
    expect(rows.every((r) => Array.isArray(r.embedding) && r.embedding.length === 3)).toBe(true);
    const hits = await t.app.services.knowledge.search({ organizationId: org.orgId, mode: 'live' }, [apples!, pears!], 'crisp fruit', 2);
    expect(hits.map((h) => [h.documentId, h.ranking])).toEqual([[apples, 'semantic'], [pears, 'semantic']]);
    expect(hits[0]!.rank).toBeCloseTo(1, 2);
    expect(requests.at(-1)!.input).toEqual(['crisp fruit']);
  });

  it('test mode ranks by full text only (the same documents, the other order), calling no provider', async () => {
    const before = requests.length;
    const [apples, pears] = await agentWithDocs(org.testKey, DOCS);
    const hits = await t.app.services.knowledge.search({ organizationId: org.orgId, mode: 'test' }, [apples!, pears!], 'crisp fruit', 2);
    expect(hits.map((h) => [h.documentId, h.ranking])).toEqual([[pears, 'full_text'], [apples, 'full_text']]);
    expect(requests.length).toBe(before);
  });

  it('an embedding failure at upload indexes for full text only; retrieval still answers', async () => {
    const [broken] = await agentWithDocs(org.liveKey, { 'broken.txt': 'BROKEN fruit crate inventory.' });
    const { rows } = await t.db.query('select embedding from agent_knowledge_chunks where document_id = $1', [broken]);
    expect(rows.every((r) => r.embedding === null)).toBe(true);
    const hits = await t.app.services.knowledge.search({ organizationId: org.orgId, mode: 'live' }, [broken!], 'fruit', 1);
    expect(hits).toHaveLength(1);
    expect(hits[0]!.ranking).toBe('full_text');
  });
});
