/**
 * Launch commands in shell scripts (`accelerate launch --fsdp_*`, `python train.py --fsdp ...`) read as framework
 * plans.
 */
import * as path from 'node:path';
import { flags, pythonScriptOf, tokens } from '../parsing/commandLine';
import { launchFlagSettings, acceleratePlan } from './accelerate';
import type { VersionPin } from '../vocabulary/versions';
import { posInt, readConfigText } from './configDoc';
import { trainingArgumentsPlan } from './transformers';
import { adapterUndecided, scriptAdapterFlags } from './argumentsFile';
import type { FrameworkCallFact } from '../analysis/facts';
import type { PlainValue } from '../python/plain';
import type { FrameworkPlan } from './types';
import type { Range } from '../vocabulary/range';

/** A launch command of a shell script that configures FSDP on its command line. */
export interface LaunchCommand {
  /** 0-based line where the command starts. */
  line: number;
  plan: FrameworkPlan;
  /** The Python script it runs (`train.py`), relative to the launch script's folder. */
  script?: string;
  /** `--model_name_or_path ORG/NAME` (Transformers' example scripts), or a config file it passes. */
  model?: string;
  /** `--config_file PATH` of `accelerate launch`. */
  configFile?: string;
}

const strip = (s: string | undefined) => s?.replace(/^["']|["']$/g, '');

/**
 * FSDP configured on launch command lines: `accelerate launch --use_fsdp --fsdp_version 2 --fsdp_* ...` and the
 * Transformers form `python train.py --fsdp "full_shard auto_wrap" --fsdp_transformer_layer_cls_to_wrap X`
 * (`torchrun` or `accelerate launch` in front). Backslash continuations join a command's lines.
 */
export function launchCommands(
  file: string,
  text: string,
  versions: { accelerate?: VersionPin; transformers?: VersionPin } = {},
  /** The project's files, for the configuration files a command names (`--fsdp_config fsdp.json`). */
  reader?: { readFile(abs: string): string | undefined; roots: readonly string[] },
): LaunchCommand[] {
  const out: LaunchCommand[] = [];
  const lines = text.split('\n');
  let joined = '';
  let start = 0;
  lines.forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    if (!joined) start = i;
    joined += `${line.replace(/\\$/, '')} `;
    if (line.endsWith('\\')) return;
    const cmd = joined.replace(/\s#.*$/, '');
    joined = '';
    if (/^\s*#/.test(cmd) || !/--fsdp|--use_fsdp/.test(cmd)) return;
    const opts = flags(cmd);
    const script = pythonScriptOf(cmd) ?? undefined;
    const model = strip(opts.get('--model_name_or_path') ?? opts.get('--model_name') ?? opts.get('--model'));
    const accelerate = /\baccelerate\s+launch\b/.test(cmd);
    const name = path.basename(file);
    // Transformers' own flags after the script name: --fsdp "full_shard auto_wrap".
    const afterScript = script ? cmd.slice(cmd.indexOf(script) + script.length) : '';
    const hf = script ? flags(afterScript) : new Map<string, string>();
    const fsdpWords = strip(hf.get('--fsdp'));
    let plan: FrameworkPlan | undefined;
    if (fsdpWords !== undefined) {
      // The script's TrainingArguments as HfArgumentParser reads them from its flags, through the one reading of
      // TrainingArguments (FSDP and its fsdp_config file, precision, batch, accumulation, checkpointing, sequence,
      // optimizer).
      const range = {
        start: { line: start, character: 0 },
        end: { line: start, character: lines[start]!.length },
      };
      const call = scriptFlagsCall(afterScript, start + 1, range);
      // A relative `--fsdp_config` path: from the launch script's folder, else from a project root (where
      // launch scripts are usually run).
      const readJson = (rel: string) => {
        for (const dir of [path.dirname(file), ...(reader?.roots ?? [])]) {
          const abs = path.resolve(dir, rel);
          const text = reader?.readFile(abs);
          if (text === undefined) continue;
          const doc = readConfigText(abs, text);
          return 'error' in doc ? undefined : { data: doc.data, doc };
        }
        return undefined;
      };
      plan = trainingArgumentsPlan(call, file, versions, readJson, true) ?? undefined;
      // TRL's adapter flags read; a script's own adapter or quantisation flags named, the job's kind undecided.
      const adapter = scriptAdapterFlags(call.kwargs);
      if (plan && adapter.fineTune) {
        plan.fineTune = adapter.fineTune;
        plan.fineTuneWhere = `--use_peft at ${name}:${start + 1}`;
      } else if (plan && adapter.unread)
        plan.undecided = [adapterUndecided(adapter.unread, `${name}:${start + 1}`)];
      if (plan && typeof call.kwargs.fsdp_config === 'string' && !readJson(call.kwargs.fsdp_config))
        plan.notes.push(
          `--fsdp_config ${call.kwargs.fsdp_config} at ${name}:${start + 1} is not found or not read: its settings are left at Transformers' defaults`,
        );
      // torchrun's processes: the world size the Trainer runs on.
      const launcher = flags(script ? cmd.slice(0, cmd.indexOf(script)) : cmd);
      const nproc = posInt(strip(launcher.get('--nproc_per_node') ?? launcher.get('--nproc-per-node')));
      const nnodes = posInt(strip(launcher.get('--nnodes'))) ?? 1;
      if (plan && nproc) {
        plan.values.gpusPerNode = nproc;
        plan.values.worldSize = nproc * nnodes;
        plan.details.gpusPerNode = plan.details.worldSize = `--nproc_per_node at ${name}:${start + 1}`;
      }
    } else if (
      accelerate &&
      (opts.has('--use_fsdp') ||
        /\s--use_fsdp\b/.test(cmd) ||
        [...opts.keys()].some((k) => k.startsWith('--fsdp_')))
    ) {
      const launchFlags: Record<string, { v: string; line: number }> = {};
      const before = script ? cmd.slice(0, cmd.indexOf(script)) : cmd;
      for (const [k, v] of flags(before))
        launchFlags[k.replace(/^--/, '')] = { v: strip(v) ?? v, line: start };
      plan = acceleratePlan(launchFlagSettings(launchFlags, file), 'Accelerate', versions.accelerate);
      // accelerate/commands/launch.py `_validate_launch_command`: one of --cpu, --multi_gpu, --tpu,
      // --use_deepspeed, --use_fsdp at a time, or it raises before the job starts.
      const words = new Set(tokens(before).map((t) => t.replace(/=.*$/, '')));
      const others = ['--multi_gpu', '--cpu', '--tpu', '--use_deepspeed'].filter((w) => words.has(w));
      if (words.has('--use_fsdp') && others.length)
        plan.traps.push({
          rule: 'FSDP016',
          range: {
            start: { line: start, character: 0 },
            end: { line: start, character: lines[start]!.length },
          },
          summary: `accelerate launch raises with ${others.join(' and ')} beside --use_fsdp: drop ${others.join(' and ')}`,
          message: `accelerate launch takes one of --cpu, --multi_gpu, --tpu, --use_deepspeed and --use_fsdp: with ${others.join(' and ')} beside --use_fsdp it raises ValueError before the job starts. Drop ${others.join(' and ')}: --use_fsdp already runs one process per GPU.`,
        });
    }
    if (!plan) return;
    const configFile = strip(opts.get('--config_file'));
    out.push({
      line: start,
      plan,
      ...(script ? { script } : {}),
      ...(model ? { model } : {}),
      ...(configFile ? { configFile } : {}),
    });
  });
  return out;
}

/**
 * A Transformers script's flags as HfArgumentParser reads them: `--key value`, and a bare `--flag` as True (bool
 * fields take `nargs="?", const=True`); `True`/`False` (any case, `yes`/`no`) as booleans (`string_to_bool`),
 * integers and decimals as numbers, anything else as the string.
 */
export function hfArguments(args: string): Record<string, PlainValue> {
  const out: Record<string, PlainValue> = {};
  const toks = tokens(args).map((t) => t.replace(/^(["'])(.*)\1$/s, '$2'));
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    if (!t.startsWith('--')) continue;
    const eq = t.indexOf('=');
    const key = (eq > 0 ? t.slice(2, eq) : t.slice(2)).replace(/-/g, '_');
    const next = toks[i + 1];
    const raw =
      eq > 0 ? t.slice(eq + 1) : next !== undefined && !next.startsWith('--') ? (i++, next) : 'True';
    out[key] = /^(true|yes)$/i.test(raw)
      ? true
      : /^(false|no)$/i.test(raw)
        ? false
        : /^-?\d+$/.test(raw)
          ? Number(raw)
          : /^-?\d*\.\d+(e-?\d+)?$|^-?\d+e-?\d+$/i.test(raw)
            ? Number(raw)
            : raw;
  }
  return out;
}

/** The TrainingArguments a script's flags make (`hfArguments`), as a call at a launch file's line. */
export function scriptFlagsCall(args: string, line: number, range: Range): FrameworkCallFact {
  return {
    kind: 'TrainingArguments',
    callee: 'transformers.TrainingArguments',
    line,
    range,
    kwargs: hfArguments(args),
    kwargLines: {},
  };
}
