/** The training setup the code writes: device meshes (and the slice of one a wrap uses), optimizers, mixed-precision policies and activation checkpointing. */
import { up } from '../parsing/python';
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import { enclosingFunction, enclosingStatement, findBinding, qualifiedName } from '../python/scope';
import { OPTIMIZERS } from './apis';
import { readArgs, readOptions } from './arguments';
import { branchPath } from './branches';
import { statementInfo, loopsOf } from './context';
import { type Evaluator } from './evaluator';
import type { CheckpointFact, MeshFact, MixedPrecisionFact, OptimizerFact } from './facts';
import { lastSegment } from './options';
import { neverRunsReason, undecidedTests } from './wrapCalls';

export function meshFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  api: 'init_device_mesh' | 'DeviceMesh',
): MeshFact {
  const args = readArgs(file, call);
  const shapeNode =
    args.keywords.get('mesh_shape') ?? args.keywords.get('mesh') ?? args.positional[1] ?? null;
  const deviceNode = args.keywords.get('device_type') ?? args.positional[0] ?? null;
  const namesNode = args.keywords.get('mesh_dim_names') ?? null;
  let shape: (number | null)[] | null = null;
  if (shapeNode && api === 'init_device_mesh') {
    const v = ev.eval(shapeNode);
    if (v.k === 'seq') shape = v.items.map((x) => (x.k === 'num' && x.int ? x.v : null));
    else if (v.k === 'num' && v.int) shape = [v.v];
  }
  let dimNames: string[] | null = null;
  if (namesNode) {
    const v = ev.eval(namesNode);
    if (v.k === 'seq' && v.items.every((x) => x.k === 'str'))
      dimNames = v.items.map((x) => (x as { v: string }).v);
    else if (v.k === 'str') dimNames = [v.v];
  }
  const device = deviceNode ? ev.eval(deviceNode) : null;
  const parent = up(call);
  const scope = enclosingFunction(call);
  return {
    name:
      parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
        ? (parent.childForFieldName('left')?.text ?? null)
        : null,
    line: file.line(call),
    range: rangeOf(call),
    api,
    deviceType: device?.k === 'str' ? device.v : null,
    shape,
    shapeText: shapeNode?.text ?? '',
    dimNames,
    function: scope ? qualifiedName(scope) : null,
  };
}

export function optimizerFact(file: SourceFile, ev: Evaluator, call: Node, qualified: string): OptimizerFact {
  const args = readArgs(file, call);
  const paramsNode = args.keywords.get('params') ?? args.positional[0] ?? null;
  const info = OPTIMIZERS[qualified];
  let target: string | null = null;
  if (paramsNode) {
    const calls =
      paramsNode.type === 'call'
        ? [paramsNode, ...paramsNode.descendantsOfType('call')]
        : paramsNode.descendantsOfType('call');
    for (const c of calls) {
      const f = c.childForFieldName('function');
      const attr = f?.type === 'attribute' ? f.childForFieldName('attribute')?.text : undefined;
      if (f && (attr === 'parameters' || attr === 'named_parameters')) {
        target = f.childForFieldName('object')?.text ?? null;
        break;
      }
    }
    if (!target && paramsNode.type === 'identifier') {
      // `params = model.parameters(); AdamW(params)`
      const b = findBinding(file, paramsNode.text, paramsNode);
      if (b?.kind === 'assign' && b.value) {
        const f = b.value.type === 'call' ? b.value.childForFieldName('function') : null;
        if (
          f?.type === 'attribute' &&
          /^(named_)?parameters$/.test(f.childForFieldName('attribute')?.text ?? '')
        )
          target = f.childForFieldName('object')?.text ?? null;
      }
    }
  }
  const scope = enclosingFunction(call);
  let family = info?.family ?? 'adamw';
  if (family === 'sgd') {
    // SGD keeps a momentum buffer only when momentum is non-zero.
    const momentum = args.keywords.get('momentum') ?? args.positional[2];
    const v = momentum ? ev.eval(momentum) : null;
    if (v && !(v.k === 'num' && v.v === 0)) family = 'sgd-momentum';
  }
  return {
    name: info?.name ?? lastSegment(qualified),
    qualified,
    family,
    line: file.line(call),
    range: rangeOf(call),
    statement: statementInfo(file, enclosingStatement(call)),
    paramsText: paramsNode?.text ?? '',
    target,
    function: scope ? qualifiedName(scope) : null,
    branch: branchPath(call, scope),
    options: readOptions(ev, { ...args, positional: [] }, null, ['params']).options,
  };
}

export function checkpointFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  api: CheckpointFact['api'],
): CheckpointFact {
  const scope = enclosingFunction(call);
  const loops = loopsOf(file, call, scope);
  // Whether it runs, as for a wrap call: off by a test false as written or by a default, or under tests not known.
  const never = neverRunsReason(ev, call, scope);
  const undecided = never ? [] : undecidedTests(ev, call, scope, loops.length > 0);
  return {
    api,
    line: file.line(call),
    range: rangeOf(call),
    callee: call.childForFieldName('function')?.text ?? '',
    text: call.text.length > 200 ? call.text.slice(0, 200) + '…' : call.text,
    loop: loops[loops.length - 1] ?? null,
    function: scope ? qualifiedName(scope) : null,
    options: readOptions(ev, readArgs(file, call), api === 'gradient_checkpointing_enable' ? null : api, [])
      .options,
    ...(never?.byDefault ? { offByDefault: never.reason } : never ? { neverRuns: never.reason } : {}),
    ...(undecided.length ? { undecided } : {}),
  };
}

export function mixedPrecisionFact(
  file: SourceFile,
  call: Node,
  api: 'MixedPrecisionPolicy' | 'MixedPrecision',
): MixedPrecisionFact {
  const parent = up(call);
  const left =
    parent?.type === 'assignment' && parent.childForFieldName('right')?.id === call.id
      ? parent.childForFieldName('left')
      : null;
  const variable = left?.type === 'identifier' ? left.text : null;
  let used = true;
  if (variable && parent) {
    const scope = enclosingFunction(call);
    const end = scope ? scope.endIndex : file.text.length;
    // Read again after the assignment (module-level variables may be read by functions defined earlier, too).
    const from = scope ? parent.endIndex : 0;
    used = file
      .identifiers(variable, from, end)
      .some((id) => id.startIndex !== left!.startIndex && !isAssignedName(id));
  }
  return { api, variable, line: file.line(call), range: rangeOf(call), used };
}

export function isAssignedName(id: Node): boolean {
  const p = up(id);
  return p?.type === 'assignment' && p.childForFieldName('left')?.id === id.id;
}
