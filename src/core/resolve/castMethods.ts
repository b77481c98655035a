/** Methods called on an object cast to a class of another file (`cast(BlockBase, block).apply_fsdp(...)`): which of that file's classes define them, and their wraps. */
import { up, type Node } from '../parsing/python';
import type { SourceFile } from '../parsing/source';
import type { FileFacts, WrapCall } from '../analysis/facts';
import { lastSegment } from '../analysis/options';
import { scanFile } from '../analysis/scan';
import { dottedText, findBinding, methodCallsOn } from '../python/scope';
import { iterablePath, pathOf } from '../analysis/paths';
import type { Project } from '../project/project';
import { definitionFile } from '../project/definitions';

/** The most classes of one file read for a class's subclasses. */
const MAX_CLASSES = 256;

/** A call of a method on a name bound to `cast(Cls, x)`, `Cls` imported from `module`. */
export interface CastSite {
  call: Node;
  cls: string;
  module: string;
  method: string;
  /** The cast object's module path in the caller's names (`self.blocks.*` for a loop over `self.blocks`). */
  receiver: string;
  /** The receiver as written at the call (`block`). */
  written: string;
}

/**
 * Calls of methods on the name a `cast(Cls, x)` is assigned to (`block = cast(TransformerBlockBase, block)`, then
 * `block.apply_fsdp(...)`), while that name still holds it. `id` is `Cls` as written in the cast.
 */
export function castSites(source: SourceFile, id: Node, module: string, cls: string): CastSite[] {
  const args = up(id);
  const cast = args?.type === 'argument_list' ? up(args) : null;
  const fn = cast?.type === 'call' ? cast.childForFieldName('function') : null;
  const list = args?.namedChildren.filter((c) => c.type !== 'comment') ?? [];
  if (!fn || !cast || lastSegment(dottedText(fn)) !== 'cast' || list[0]?.id !== id.id || !list[1]) return [];
  const assign = up(cast);
  const left = assign?.type === 'assignment' ? assign.childForFieldName('left') : null;
  if (left?.type !== 'identifier' || assign?.childForFieldName('right')?.id !== cast.id) return [];
  // `block = cast(Base, block)` rebinds the loop's own name: the object is what the name held before.
  const arg = list[1];
  const before = arg.type === 'identifier' ? findBinding(source, arg.text, assign) : null;
  const receiver = (
    before?.kind === 'loop' ? iterablePath(source, before.loop, 0) : pathOf(source, arg, cast)
  ).join('.');
  return methodCallsOn(source, left, assign.endIndex).map(({ call, method }) => ({
    call,
    cls,
    module,
    method,
    receiver,
    written: left.text,
  }));
}

/** What a cast site's method is in the class's file. */
export interface CastMethods {
  /** The file that defines the class. */
  where: string;
  facts: FileFacts;
  /** The class and its subclasses in that file that define the method themselves, in the file's order. */
  definers: string[];
  /** The wrap calls of each definer's method, by definer. */
  wraps: Map<string, WrapCall[]>;
}

/**
 * The classes of the file defining `site.cls` (it or its subclasses there) whose own method of that name may run
 * on the cast object; undefined when the class's file is not in the project.
 */
export function castMethods(project: Project, from: string, site: CastSite): CastMethods | undefined {
  const where = definitionFile(project, from, site.module, site.cls, 'class')?.where;
  const file = where ? project.file(where) : undefined;
  if (!where || !file) return undefined;
  const classes = classesOf(file.source);
  // The class and every class of the file that derives from it, directly or through another.
  const family = new Set([site.cls]);
  for (let grown = true; grown;) {
    grown = false;
    for (const c of classes)
      if (!family.has(c.name) && c.bases.some((b) => family.has(b))) {
        family.add(c.name);
        grown = true;
      }
  }
  const definers = classes.filter((c) => family.has(c.name) && c.methods.has(site.method)).map((c) => c.name);
  const facts = project.memo(`cast-facts:${where}`, () => scanFile(project.grammar, file.source));
  const wraps = new Map(
    definers.map((d) => [
      d,
      facts.calls.filter((c) => c.function === `${d}.${site.method}` && !c.incomplete && !c.neverRuns),
    ]),
  );
  return { where, facts, definers, wraps };
}

interface ClassInfo {
  name: string;
  bases: string[];
  methods: Set<string>;
}

/** The module-level classes of a file: their names, the last names of their bases, and the methods they define. */
function classesOf(source: SourceFile): ClassInfo[] {
  const out: ClassInfo[] = [];
  for (const st of source.root.namedChildren) {
    if (out.length >= MAX_CLASSES) break;
    const def = st.type === 'decorated_definition' ? st.childForFieldName('definition') : st;
    if (def?.type !== 'class_definition') continue;
    const name = def.childForFieldName('name')?.text;
    if (!name) continue;
    const bases = (def.childForFieldName('superclasses')?.namedChildren ?? [])
      .filter((b) => b.type === 'identifier' || b.type === 'attribute')
      .map((b) => lastSegment(dottedText(b)));
    const methods = new Set<string>();
    for (const m of def.childForFieldName('body')?.namedChildren ?? []) {
      const f = m.type === 'decorated_definition' ? m.childForFieldName('definition') : m;
      const n = f?.type === 'function_definition' ? f.childForFieldName('name')?.text : undefined;
      if (n) methods.add(n);
    }
    out.push({ name, bases, methods });
  }
  return out;
}
