/** The configuration files a script loads by a path it writes, read from the project for the script's values. */
import * as path from 'node:path';
import type { Project } from '../project/project';
import { formatOf, readConfigText } from './configDoc';
import { definitionReader } from '../project/definitions';

/**
 * A reader of the configuration files a script loads by a path it writes (`yaml.safe_load(open("cfg.yaml"))`): the
 * path taken from the script's folder, then from each project root, as the job may be started from either; only
 * files inside the project roots are read, YAML, JSON or TOML, at most MAX_CONFIG_BYTES, each once.
 */
export function configDataReader(project: Project, script: string): (file: string) => unknown {
  const roots = project.roots.map((r) => path.resolve(r));
  const inside = (f: string) => roots.some((r) => f === r || f.startsWith(r + path.sep));
  return (file) => {
    if (!formatOf(file) || file.includes('\0')) return undefined;
    const candidates = path.isAbsolute(file)
      ? [file]
      : [path.resolve(path.dirname(script), file), ...roots.map((r) => path.resolve(r, file))];
    for (const abs of candidates) {
      if (!inside(abs)) continue;
      const data = project.memo(`config-data:${abs}`, () => {
        const text = project.fs.readFile(abs);
        if (text === undefined) return null;
        const doc = readConfigText(abs, text);
        return 'error' in doc ? null : doc.data;
      });
      if (data) return data;
    }
    return undefined;
  };
}

/**
 * What a script's values are read through besides its own text: the config files it loads, and the classes and
 * functions of the project it imports (a config dataclass, an updater of it).
 */
export function projectReaders(
  project: Project,
  script: string,
): { readData: (file: string) => unknown; readDefinition: ReturnType<typeof definitionReader> } {
  return { readData: configDataReader(project, script), readDefinition: definitionReader(project, script) };
}
