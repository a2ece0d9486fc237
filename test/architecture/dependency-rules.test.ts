/**
 * The dependency rules of ARCHITECTURE.md are enforced by lint; this checks that lint really
 * fails on each kind of wrong import (and passes the allowed ones), with ESLint's own API.
 */
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: root });

async function restricted(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('dependency rules', () => {
  it('a module may not import another module\'s service, entities or internals', async () => {
    expect(await restricted('src/modules/verify/verify.service.ts', "import type { MessagingService } from '../messaging/messaging.service.ts';\nexport type X = MessagingService;\n")).toHaveLength(1);
    expect(await restricted('src/modules/verify/verify.graphql.ts', "import { Message } from '../messaging/messaging.entities.ts';\nexport const x = Message;\n")).toHaveLength(1);
  });

  it('a module may import another module\'s manifest and declared ports', async () => {
    expect(await restricted('src/modules/verify/verify.service.ts', "import type { MessageSenderPort } from '../messaging/messaging.ports.ts';\nexport type X = MessageSenderPort;\n")).toEqual([]);
    expect(await restricted('src/modules/verify/verify.operations.ts', "import { messagingModule } from '../messaging/index.ts';\nexport const x = messagingModule;\n")).toEqual([]);
  });

  it('services and entities import no surface and no pg-boss types', async () => {
    expect(await restricted('src/modules/numbers/numbers.service.ts', "import { builder } from '../../graphql/builder.ts';\nexport const x = builder;\n")).toHaveLength(1);
    expect(await restricted('src/modules/numbers/numbers.service.ts', "import type { PgBoss } from 'pg-boss';\nexport type X = PgBoss;\n")).toHaveLength(1);
    expect(await restricted('src/modules/numbers/numbers.entities.ts', "import { route } from '../../rest/route.ts';\nexport const x = route;\n")).toHaveLength(1);
  });

  it('platform and providers import no module, surface or composition root', async () => {
    expect(await restricted('src/platform/events/events.ts', "import { MODULES } from '../../modules/index.ts';\nexport const x = MODULES;\n")).toHaveLength(1);
    expect(await restricted('src/providers/messaging/types.ts', "import type { RequestContext } from '../../context.ts';\nexport type X = RequestContext;\n")).toHaveLength(1);
    expect(await restricted('src/platform/events/events.ts', "import { newId } from '../ids.ts';\nexport const x = newId;\n")).toEqual([]);
  });
});
