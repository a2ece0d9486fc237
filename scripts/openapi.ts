/**
 * `npm run codegen` (after the GraphQL schema): prints the presenters' response shapes to
 * `schema/responses.json`, the error codes each operation's code can raise to
 * `schema/operation-errors.json`, the OpenAPI 3.1 document of the route table to
 * `schema/openapi.json`, and the event catalog to `docs/events.md`. All are committed; CI fails when
 * they drift from the code.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { responseSchemas } from './response-schemas.ts';
import { operationErrors } from './operation-errors.ts';
import { modulesProgram } from './modules-program.ts';
import { eventCatalog } from './event-catalog.ts';
import { buildOpenApi } from '../src/http/openapi.ts';
import { MODULES } from '../src/modules/index.ts';

const root = path.resolve(import.meta.dirname, '..');
const print = (file: string, value: unknown) => writeFileSync(path.join(root, file), `${JSON.stringify(value, null, 2)}\n`);
// One program for both readings of the code (building it is most of this step's time).
const program = modulesProgram(root);
const responses = responseSchemas(root, program);
print('schema/responses.json', responses);
const errors = operationErrors(root, program);
print('schema/operation-errors.json', errors);
const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
print('schema/openapi.json', buildOpenApi(MODULES.flatMap((m) => [...(m.routes ?? [])]), { version, responses, errors }));
// The event catalog reads the same program (the modules' manifests and the code that emits events).
writeFileSync(path.join(root, 'docs/events.md'), eventCatalog(root, program));
