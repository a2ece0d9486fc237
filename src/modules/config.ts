/**
 * The whole configuration: `config.ts`'s core settings, then each module's section read by its
 * manifest's `config` reader. Here, beside the module list, so `config.ts` stays a leaf that
 * imports no module (the modules import its types).
 */
import { loadCoreConfig, type Config } from '../config.ts';
import { EnvReader, settingsReference } from '../platform/env.ts';
import { MODULES } from './index.ts';

/** The core settings, then each module's section (under its name) read through one {@link EnvReader}. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, argv: string[] = process.argv.slice(2)): Config {
  const core = loadCoreConfig(env, argv);
  const reader = new EnvReader(env);
  const sections: Record<string, unknown> = {};
  for (const m of MODULES) if (m.config) sections[m.name] = m.config(reader, core);
  return { ...core, ...sections } as Config;
}

/**
 * docs/configuration.md: every module's settings as its config section documents them (read
 * against an empty environment, so the defaults are the documented ones).
 */
export function moduleSettingsReference(): string {
  const core = loadCoreConfig({ APP_SECRET: 'reference'.repeat(4) }, []);
  const sections = MODULES.flatMap((m) => {
    if (!m.config) return [];
    const reader = new EnvReader({});
    m.config(reader, core);
    return [{ module: m.name, settings: reader.documented }];
  });
  return settingsReference(sections);
}

