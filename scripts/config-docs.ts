/** Writes docs/configuration.md from the modules' config sections (part of `npm run codegen`). */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { moduleSettingsReference } from '../src/modules/config.ts';

const file = path.resolve(import.meta.dirname, '../docs/configuration.md');
writeFileSync(file, moduleSettingsReference());
console.log(`wrote ${path.relative(process.cwd(), file)}`);
