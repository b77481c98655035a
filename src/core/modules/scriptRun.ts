/** An interpreter that runs a script's code as it runs: with its command line and the config files its code loads. */
import { projectReaders } from '../frameworks/scriptConfigs';
import type { Project } from '../project/project';
import { Interpreter } from './interpreter';

/** An interpreter for `script`, given its command line when known (`OmegaConf.from_cli()` reads it). */
export function scriptInterpreter(project: Project, script: string, argv?: readonly string[]): Interpreter {
  const interp = new Interpreter(project);
  interp.script = {
    file: script,
    context: { ...(argv ? { argv } : {}), ...projectReaders(project, script) },
  };
  return interp;
}
