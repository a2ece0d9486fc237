/**
 * The TypeScript program the codegen scripts read the code through (response-schemas.ts,
 * operation-errors.ts): every module's `*.rest.ts` and `*.operations.ts` and the module list.
 * Building it type-checks most of the project (about 20 s on a 2-core machine), so `npm run
 * codegen` builds it once and hands it to both; each built its own before, and the step took 45 s.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** The files of `src/modules/<context>/` whose names end with `suffix` (`.rest.ts`, `.operations.ts`). */
export function moduleFiles(root: string, suffix: string): string[] {
  const modules = path.join(root, 'src/modules');
  return readdirSync(modules, { withFileTypes: true }).filter((d) => d.isDirectory())
    .flatMap((d) => readdirSync(path.join(modules, d.name)).filter((f) => f.endsWith(suffix)).map((f) => path.join(modules, d.name, f)));
}

export function modulesProgram(root: string): ts.Program {
  const config = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  // The module list too: its manifests provide the ports (object literals) operations call through.
  return ts.createProgram([...moduleFiles(root, '.rest.ts'), ...moduleFiles(root, '.operations.ts'), path.join(root, 'src/modules/index.ts')], options);
}
