/**
 * The event catalog (docs/events.md, written by `npm run codegen` through scripts/event-catalog.ts)
 * names exactly the event types the modules' manifests declare, each with its data; CI's drift
 * check compares the whole file with a fresh run.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MODULES } from '../../src/modules/index.ts';

const catalog = readFileSync(path.resolve(import.meta.dirname, '../../docs/events.md'), 'utf8');
/** Each `### \`name\`` section of the catalog with its text. */
const sections = new Map([...catalog.matchAll(/^### `([^`]+)`\n([\s\S]*?)(?=^##|$(?![\s\S]))/gm)].map((m) => [m[1]!, m[2]!.trim()]));

describe('event catalog (docs/events.md)', () => {
  const declared = MODULES.flatMap((m) => [...(m.events ?? [])]);

  it('lists every event type a manifest declares, and no other', () => {
    expect(declared.length).toBeGreaterThan(40);
    expect([...sections.keys()].sort()).toEqual([...declared].sort());
  });

  it('groups them under the module that declares them', () => {
    for (const m of MODULES) {
      for (const name of m.events ?? []) {
        const at = catalog.indexOf(`### \`${name}\``);
        const heading = catalog.lastIndexOf('\n## ', at);
        expect(catalog.slice(heading + 4, catalog.indexOf('\n', heading + 1)), name).toBe(m.name);
      }
    }
  });

  it('gives the data of each, read from the code that emits it', () => {
    const described = [...sections].filter(([, text]) => text.startsWith('| Field | Type |') || /^Data: the same fields as `[a-z._]+`/.test(text));
    // Every type but a few built from a map (their data varies) has its fields.
    expect(described.length, [...sections].filter(([, t]) => !described.some(([, d]) => d === t)).map(([n]) => n).join(', ')).toBeGreaterThanOrEqual(sections.size - 3);
    expect(sections.get('message.queued')).toMatch(/\| `message_id` \| `string` \|/);
    expect(sections.get('message.delivered')).toMatch(/same fields as `message\.queued`/);
    expect(sections.get('call.completed')).toMatch(/\| `duration_seconds` \| `number \\\| null` \|/);
  });
});
