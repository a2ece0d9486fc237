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
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports' || m.ruleId === 'house/zones').map((m) => m.message);
}

describe('dependency rules', () => {
  it('a module may not import another module\'s service, entities or internals', async () => {
    expect(await restricted('src/modules/verify/verify.service.ts', "import type { MessagingService } from '../messaging/messaging.service.ts';\nexport type X = MessagingService;\n")).toHaveLength(1);
    expect(await restricted('src/modules/verify/verify.graphql.ts', "import { Message } from '../messaging/messaging.entities.ts';\nexport const x = Message;\n")).toHaveLength(1);
  });

  it('the zones hold by resolved path: a file in a subfolder cannot reach another module deeper, nor platform a module', async () => {
    expect(await restricted('src/modules/verify/sub/deep.ts', "import { Message } from '../../messaging/messaging.entities.ts';\nexport const x = Message;\n")).toHaveLength(1);
    expect(await restricted('src/modules/verify/sub/deep.ts', "export { Message } from '../../messaging/messaging.entities.ts';\n")).toHaveLength(1);
    expect(await restricted('src/modules/verify/sub/deep.ts', "export const x = () => import('../../messaging/messaging.service.ts');\n")).toHaveLength(1);
    expect(await restricted('src/modules/verify/sub/deep.ts', "import type { MessageSenderPort } from '../../messaging/messaging.ports.ts';\nimport { verifyModule } from '../index.ts';\nimport { x } from '../other/y.ts';\nexport type X = [MessageSenderPort, typeof verifyModule, typeof x];\n")).toEqual([]);
    expect(await restricted('src/platform/jobs/deep.ts', "import { MODULES } from '../../modules/index.ts';\nexport const x = MODULES;\n")).toHaveLength(1);
  });

  it('every non-surface file of a module is transport-free, not only services and entities', async () => {
    expect(await restricted('src/modules/voice/sandbox/timeline.ts', "import type { PgBoss } from 'pg-boss';\nexport type X = PgBoss;\n")).toHaveLength(1);
    expect(await restricted('src/modules/flows/executions.engine.ts', "import { builder } from '../../graphql/builder.ts';\nexport const x = builder;\n")).toHaveLength(1);
    expect(await restricted('src/modules/flows/flows.graphql.ts', "import { builder } from '../../graphql/builder.ts';\nexport const x = builder;\n")).toEqual([]);
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
