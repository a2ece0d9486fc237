/**
 * The ordered list of migrations: every `MigrationYYYYMMDDHHMMSS_<name>.ts` file of this folder,
 * by name (a new context adds its file, nothing else). The migrator runs them by name, so never
 * rename or edit a landed one.
 */
import { readdirSync } from 'node:fs';
import type { MigrationObject } from '@mikro-orm/core';

const FILE = /^(Migration\d{14}_\w+)\.ts$/;

export const migrationsList = await Promise.all(
  readdirSync(import.meta.dirname)
    .map((f) => FILE.exec(f)?.[1])
    .filter((name): name is string => name !== undefined)
    .sort()
    .map(async (name) => {
      // A static `./Migration` prefix: vite (vitest) resolves a variable import by globbing its
      // pattern, and `./${name}.ts` would match this folder's own index (it warned on every run).
      const module = (await import(`./Migration${name.slice('Migration'.length)}.ts`)) as Record<string, MigrationObject['class']>;
      const migration = module[name];
      if (!migration) throw new Error(`migrations/${name}.ts must export the class ${name}`);
      return { name, class: migration };
    }),
);
