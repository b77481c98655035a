/**
 * What a wrap call does in words (no numbers): the lens text before an estimate, the scan's text, the panel's call
 * list.
 */
import { shortDtype } from '../vocabulary/dtypes';
import { oneLine } from '../vocabulary/words';
import type { WrapCall } from './facts';
import type { MixedPrecisionValue, OffloadValue } from './options';
import type { ModulePredicate, WrapPolicyValue } from './wrapPolicy';

/** What a loop iterates over, without the iteration method: `model.layers.items()` → `model.layers`. */
export function iterableBase(iterable: string): string {
  let t = iterable.trim();
  for (let i = 0; i < 3; i++) {
    const m = /^(?:enumerate|reversed|list|tuple|sorted|iter)\((.*)\)$/s.exec(t);
    if (m?.[1]) t = m[1].trim();
    const r = /^range\(len\((.*)\)\)$/s.exec(t);
    if (r?.[1]) t = r[1].trim();
  }
  return t
    .replace(/\.(items|values|keys|named_children|children|named_modules|modules)\(\)$/, '')
    .replace(/\[[^\]]*:[^\]]*\]$/, '');
}

/** A one-line account of what the scan detected at a wrap call (no numbers: those come from the estimator). */
export function describeCall(c: WrapCall): string {
  const parts: string[] = [];
  const gen = c.api === 'fully_shard' ? 'FSDP2' : 'FSDP1';
  parts.push(`${gen} ${unitRole(c)}`);
  const o = c.options;
  if (c.api === 'fully_shard') {
    const raf = o.reshard_after_forward;
    if (!raf)
      parts.push(c.isRoot ? 'root stays gathered from forward to backward' : 'reshards after forward');
    else if (raf.value === true) parts.push('reshards after forward');
    else if (raf.value === false) parts.push('stays gathered from forward to backward');
    else if (typeof raf.value === 'number') parts.push(`keeps a 1/${raf.value} slice after forward`);
    else parts.push(`reshard_after_forward=${raf.text}`);
  } else {
    const ss = o.sharding_strategy?.value;
    parts.push(
      typeof ss === 'string'
        ? ss
        : o.sharding_strategy
          ? `sharding_strategy=${o.sharding_strategy.text}`
          : 'FULL_SHARD',
    );
    const policy = o.auto_wrap_policy?.value as WrapPolicyValue | undefined;
    if (policy) parts.push(describePolicy(policy));
    else if (c.isRoot && c.api === 'FSDP' && c.children.length === 0)
      parts.push('no auto_wrap_policy: one unit holds the model');
  }
  const mp = (o.mp_policy ?? o.mixed_precision)?.value as MixedPrecisionValue | undefined;
  if (mp && typeof mp === 'object' && 'kind' in mp) {
    const u = mp.unresolved ?? {};
    const param = mp.param_dtype ? shortDtype(mp.param_dtype) : (u.param_dtype ?? 'model-dtype');
    const reduce = mp.reduce_dtype
      ? shortDtype(mp.reduce_dtype)
      : (u.reduce_dtype ?? (mp.kind === 'MixedPrecisionPolicy' ? param : 'fp32'));
    parts.push(`${param} params / ${reduce} reduce`);
  } else if (o.mp_policy || o.mixed_precision)
    parts.push(`mixed precision ${(o.mp_policy ?? o.mixed_precision)!.text}`);
  const off = (o.offload_policy ?? o.cpu_offload)?.value as OffloadValue | undefined;
  if (off && typeof off === 'object' && off.offloadParams) {
    const when = (o.offload_policy ?? o.cpu_offload)!.conditions;
    parts.push(when?.length ? `CPU offload if ${when.join(' and ')}` : 'CPU offload');
  }
  if (o.mesh ?? o.device_mesh) parts.push(`mesh=${(o.mesh ?? o.device_mesh)!.text}`);
  if (c.legacy) parts.push('legacy import path');
  if (c.via) parts.push(`through ${c.via.method}() (its wrap at line ${c.via.line})`);
  // Arguments written over several lines read as one.
  return parts.map((p) => oneLine(p, 100)).join(' · ');
}

function unitRole(c: WrapCall): string {
  if (c.expandedAt?.length) {
    const [cls, method] = splitMethod(c.function ?? '');
    const part = c.target === 'self' ? `each ${cls}` : `${c.target.replace(/^self\./, '')} of each ${cls}`;
    return `unit of ${part} where ${method}() is called (line ${[...new Set(c.expandedAt)].join(', ')})`;
  }
  if (c.targets.length > 1) return `one unit of [${c.targets.join(', ')}]`;
  if (c.isRoot) return c.children.length ? `root (${c.target})` : `root unit (${c.target})`;
  // A loop over modules written out, or named (`for name in ("embed", "norm")`): a unit of each.
  if (c.loop && c.paths.length && c.paths.every((p) => p.length > 1 && !p.some((k) => k.includes('*'))))
    return `unit of each of ${c.paths.map((p) => p.join('.')).join(', ')}`;
  if (c.loop) {
    const base = iterableBase(c.loop.iterable);
    const cls = c.classFilter?.join(' or ');
    const except = c.classExclude?.length ? ` except ${c.classExclude.join(', ')}` : '';
    if (/\.(named_)?modules\(\)\)*$/.test(c.loop.iterable.trim()))
      return cls ? `unit per ${cls} in ${base}` : `unit per module of ${base}${except}`;
    return cls ? `unit per ${cls} of ${base}` : `unit per block of ${base}`;
  }
  return `unit (${c.target})`;
}

/** `Block.apply_fsdp` → `['Block', 'apply_fsdp']` (a nested class keeps its outer name). */
function splitMethod(fn: string): [string, string] {
  const dot = fn.lastIndexOf('.');
  return [fn.slice(0, dot), fn.slice(dot + 1)];
}

export function describePolicy(p: WrapPolicyValue): string {
  switch (p.policy) {
    case 'transformer':
    case 'module':
      return p.classes.length ? `wraps every ${p.classes.join(', ')}` : 'wraps classes not read statically';
    case 'size':
      return p.minNumParams === null
        ? 'wraps by size'
        : `wraps modules ≥ ${formatCount(p.minNumParams)} params`;
    case 'lambda':
    case 'custom':
      return p.predicate
        ? `wraps each module that ${predicateWords(p.predicate)}`
        : p.policy === 'lambda'
          ? 'wraps where a lambda says'
          : 'custom wrap policy';
    case 'or':
      return p.policies.map(describePolicy).join('; or ');
    case 'always':
      return 'wraps every module';
    case 'unknown':
      return `auto_wrap_policy=${p.text}`;
  }
}

/** A policy's test of a module, in words (`has no child modules and its weight requires grad`). */
export function predicateWords(p: ModulePredicate): string {
  switch (p.is) {
    case 'const':
      return p.value ? 'is any module' : 'is no module';
    case 'leaf':
      return 'has no child modules';
    case 'has':
      return `has a ${p.attr}`;
    case 'trainable':
      return `has a ${p.attr} that requires grad`;
    case 'class':
      return `is a ${p.names.join(' or ')}`;
    case 'not':
      return `not (${predicateWords(p.of)})`;
    case 'and':
    case 'or':
      return p.of.map(predicateWords).join(` ${p.is} `);
    case 'if':
      return `(if it ${predicateWords(p.test)}: ${predicateWords(p.then)}; else ${predicateWords(p.else)})`;
  }
}

function formatCount(n: number): string {
  if (n >= 1e9 && n % 1e8 === 0) return `${n / 1e9}B`;
  if (n >= 1e6 && n % 1e5 === 0) return `${n / 1e6}M`;
  if (n >= 1e3 && n % 100 === 0) return `${n / 1e3}K`;
  return String(n);
}
