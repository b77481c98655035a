/**
 * Launch commands in shell scripts (`accelerate launch --fsdp_*`, `python train.py --fsdp ...`) read as framework
 * plans.
 */
import * as path from 'node:path';
import { flags, pythonScriptOf, tokens } from '../parsing/commandLine';
import { launchFlagSettings, acceleratePlan } from './accelerate';
import type { VersionPin } from '../vocabulary/versions';
import { posInt } from './configDoc';
import { trainingArgumentValues } from './transformers';
import type { PlainValue } from '../python/plain';
import type { FrameworkPlan } from './types';

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
      const words = fsdpWords.split(/\s+/);
      const strategy = words.find((w) => /shard/.test(w));
      // --fsdp_transformer_layer_cls_to_wrap is refused by Transformers 5's argument parser: the command is 4.x's.
      const clsFlag = hf.has('--fsdp_transformer_layer_cls_to_wrap');
      const v5 = versions.transformers ? !/^4\./.test(versions.transformers.version) : !clsFlag;
      const settings: Record<string, { v: unknown; where: string }> = {};
      const where = `--fsdp at ${name}:${start + 1}`;
      settings.fsdp_version = { v: v5 ? 2 : 1, where };
      if (strategy && !v5) settings.fsdp_sharding_strategy = { v: strategy.toUpperCase(), where };
      if (strategy && v5) settings.fsdp_reshard_after_forward = { v: strategy !== 'shard_grad_op', where };
      settings.fsdp_auto_wrap_policy = {
        v: v5 || words.includes('auto_wrap') ? 'TRANSFORMER_BASED_WRAP' : 'NO_WRAP',
        where,
      };
      if (words.includes('offload')) settings.fsdp_offload_params = { v: true, where };
      const cls = strip(hf.get('--fsdp_transformer_layer_cls_to_wrap'));
      if (cls)
        settings.fsdp_transformer_layer_cls_to_wrap = {
          v: cls,
          where: `--fsdp_transformer_layer_cls_to_wrap at ${name}:${start + 1}`,
        };
      const range = {
        start: { line: start, character: 0 },
        end: { line: start, character: lines[start]!.length },
      };
      plan = acceleratePlan(
        { file, range, rangeOf: () => range, get: (k) => settings[k] },
        'Transformers',
        versions.accelerate,
      );
      plan.notes.unshift(
        versions.transformers
          ? `Transformers ${versions.transformers.version} (${versions.transformers.where})`
          : v5
            ? 'Transformers 5 (not pinned in the workspace): FSDP2'
            : 'Transformers 4 (--fsdp_transformer_layer_cls_to_wrap, which 5 refuses): FSDP1',
      );
      // The script's TrainingArguments as HfArgumentParser reads them from its flags, through the one reading of
      // TrainingArguments (precision, batch, accumulation, checkpointing, sequence, optimizer).
      const t = trainingArgumentValues(
        {
          kind: 'TrainingArguments',
          callee: 'transformers.TrainingArguments',
          line: start + 1,
          range,
          kwargs: hfArguments(afterScript),
          kwargLines: {},
        },
        file,
        true,
      );
      for (const [key, v] of Object.entries(t.values)) {
        (plan.values as Record<string, unknown>)[key] = v;
        const d = t.details[key as keyof typeof t.details];
        if (d)
          (plan.details as Record<string, string>)[key] = d.replace(/^(\w+)=True at --\w+ at /, '--$1 at ');
      }
      // torchrun's processes: the world size the Trainer runs on.
      const launcher = flags(script ? cmd.slice(0, cmd.indexOf(script)) : cmd);
      const nproc = posInt(strip(launcher.get('--nproc_per_node') ?? launcher.get('--nproc-per-node')));
      const nnodes = posInt(strip(launcher.get('--nnodes'))) ?? 1;
      if (nproc) {
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
function hfArguments(args: string): Record<string, PlainValue> {
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
