/** `reshard_after_forward` written per loop iteration, evaluated for each module the loop wraps. */
import { up } from '../parsing/python';
import type { FileFacts, WrapCall } from '../analysis/facts';
import { findBinding } from '../python/scope';
import { namedLoopEntries } from '../analysis/paths';
import type { SourceFile } from '../parsing/source';
import type { ReshardAfterForward } from '../vocabulary/fsdp';
import { moduleAt, type ModuleNode } from '../model/tree';
import type { Node } from '../parsing/python';
import type { Project } from '../project/project';
import { Interpreter } from './interpreter';
import { moduleFromTree } from './moduleValues';
import { type Value } from '../python/values';

/**
 * `reshard_after_forward` of a wrap call in a loop, evaluated for each module the loop wraps: torchtitan's
 * `reshard_after_forward = int(layer_id) < len(model.layers) - 1` (every block but the last resharded) reads the
 * loop's key or index and the container's length, which the module tree knows. Returns a function from a wrapped
 * module's path to its value (undefined where the expression stays unknown), or undefined when the call is not of
 * that shape: a keyword argument, written inline or bound once by an assignment, in a `for` over `X`, `X.items()`,
 * `X.values()`, `X.children()` or `enumerate(X)`.
 */
export function reshardPerIteration(
  project: Project,
  facts: FileFacts,
  call: WrapCall,
  root: ModuleNode,
  modelVariable: string[],
): ((modulePath: string) => ReshardAfterForward | undefined) | undefined {
  const file = project.file(facts.path);
  if (!file || !call.loop || modelVariable.length !== 1) return undefined;
  let node: Node | null = nodeAtPosition(file.source.text, file.source.root, call.range.start);
  while (node && node.type !== 'call') node = up(node);
  if (!node) return undefined;
  const kw = node
    .childForFieldName('arguments')
    ?.namedChildren.find(
      (a) => a.type === 'keyword_argument' && a.childForFieldName('name')?.text === 'reshard_after_forward',
    );
  let expr = kw?.childForFieldName('value') ?? null;
  if (!expr) return undefined;
  if (expr.type === 'identifier') {
    // Bound once by an assignment, or a target of the loop itself (`for path, reshard in plan`).
    const b = findBinding(file.source, expr.text, expr);
    if (b?.kind === 'assign') expr = b.value;
    else if (b?.kind !== 'loop') expr = null;
    if (!expr) return undefined;
  }
  let loop: Node | null = up(node);
  while (loop && loop.type !== 'for_statement') loop = up(loop);
  const left = loop?.childForFieldName('left');
  const right = loop?.childForFieldName('right');
  if (!loop || !left || !right) return undefined;
  // How the loop hands out each child: (key, module), (index, module) or the module alone.
  const fn = right.type === 'call' ? right.childForFieldName('function') : null;
  const method = fn?.type === 'attribute' ? fn.childForFieldName('attribute')?.text : undefined;
  const kind =
    fn?.type === 'identifier' && fn.text === 'enumerate'
      ? 'index'
      : method === 'items'
        ? 'key'
        : right.type !== 'call' || method === 'values' || method === 'children'
          ? 'module'
          : null;
  const interp = new Interpreter(project);
  const named = namedEntriesOf(file.source, node);
  if (named) {
    // `for path, reshard in [("layers.0", False), ("output", True)]`: each entry's own value.
    return (modulePath: string) => {
      const i = named.paths.findIndex((p) => p.slice(modelVariable.length).join('.') === modulePath);
      const entry = named.entries[i];
      if (i < 0 || !entry) return undefined;
      const parts =
        named.targets.length === 1 ? [entry] : entry.namedChildren.filter((c) => c.type !== 'comment');
      if (parts.length !== named.targets.length) return undefined;
      const env = new Map<string, Value>();
      named.targets.forEach((t, j) => env.set(t.text, interp.evalWith(file, parts[j]!, new Map())));
      return reshardValue(interp.evalWith(file, expr, env));
    };
  }
  const names = left.type === 'identifier' ? [left] : left.namedChildren;
  if (!kind || names.length !== (kind === 'module' ? 1 : 2) || names.some((n) => n.type !== 'identifier'))
    return undefined;
  const model = moduleFromTree(root);
  return (modulePath: string) => {
    const dot = modulePath.lastIndexOf('.');
    const parent = moduleAt(root, dot < 0 ? '' : modulePath.slice(0, dot));
    const name = modulePath.slice(dot + 1);
    const index = parent?.children.findIndex((c) => c.name === name) ?? -1;
    const mod = moduleAt(root, modulePath);
    if (!parent || index < 0 || !mod) return undefined;
    const env = new Map<string, Value>([[modelVariable[0]!, model]]);
    const modV = moduleFromTree(mod);
    if (kind === 'module') env.set(names[0]!.text, modV);
    else {
      env.set(names[0]!.text, kind === 'key' ? { k: 'str', v: name } : { k: 'num', v: index, int: true });
      env.set(names[1]!.text, modV);
    }
    return reshardValue(interp.evalWith(file, expr, env));
  };
}

/** A `reshard_after_forward` value: a bool, an int, None; undefined for anything else. */
export function reshardValue(v: Value | undefined): ReshardAfterForward | undefined {
  if (!v) return undefined;
  if (v.k === 'bool') return v.v;
  if (v.k === 'num' && v.int) return v.v;
  if (v.k === 'none') return null;
  return undefined;
}

/** The loop over names written out that the wrap call's first argument is looked up by, if it is one. */
function namedEntriesOf(file: SourceFile, call: Node): ReturnType<typeof namedLoopEntries> {
  const first = call
    .childForFieldName('arguments')
    ?.namedChildren.find((a) => a.type !== 'keyword_argument' && a.type !== 'comment');
  return first ? namedLoopEntries(file, first) : null;
}

function nodeAtPosition(text: string, root: Node, pos: { line: number; character: number }): Node | null {
  let off = 0;
  for (let l = 0; l < pos.line; l++) off = text.indexOf('\n', off) + 1;
  return root.descendantForIndex(off + pos.character, off + pos.character + 1);
}
