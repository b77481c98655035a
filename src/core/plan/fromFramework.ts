/**
 * A framework's FSDP configuration (Accelerate, Transformers, Lightning, torchtune, torchtitan, DeepSpeed) as the
 * units it creates on a model, in the order it wraps them: the same `Plan` a script's own wrap calls give.
 */
import type { Plan, UnitPlan } from '../estimator/types';
import { unitsFromPolicy } from './policies';
import { TRAINABLE_LEAF, type WrapPolicyValue } from '../analysis/wrapPolicy';
import type { ArchShape } from '../model/hf';
import { classNamesOf, moduleAt, outermostOfClass, type ModuleNode } from '../model/tree';
import type { FrameworkPlan } from '../frameworks/types';

/**
 * Accelerate's FSDP2 extra units on a Transformers model: the input embedding (unless tied to the head), and the
 * final norm with the output head, or with the embedding when they are tied (`fsdp2_prepare_model`).
 */
function accelerateExtras(
  root: ModuleNode,
  shape: ArchShape | undefined,
): { embed?: string; tail: string[] } {
  const base = root.children.find((c) => c.name === 'model' || c.name === 'transformer');
  const embed = base?.children.find(
    (c) => /Embedding$/.test(c.className) && (c.name === 'embed_tokens' || c.name === 'wte'),
  );
  const norm = [...(base?.children ?? [])].reverse().find((c) => c.className.includes('Norm'));
  const head = root.children.find((c) => c.name === 'lm_head');
  const tied = shape?.tiedEmbeddings ?? head?.params.some((p) => !!p.tiedTo) ?? false;
  const tailEmbed = tied ? embed : head;
  return {
    ...(!tied && embed ? { embed: embed.path } : {}),
    tail: [norm?.path, tailEmbed?.path].filter((p): p is string => !!p),
  };
}

/**
 * The units a framework's configuration creates on a model, in wrapping order with the root last: the same
 * `Plan` a script's own `fully_shard` / `FSDP(...)` calls give, so the estimator and the rules treat both alike.
 */
export function planForFramework(fp: FrameworkPlan, root: ModuleNode, shape: ArchShape | undefined): Plan {
  const origin = `${fp.framework} (${fp.file.split(/[\\/]/).pop()}:${fp.range.start.line + 1})`;
  const site = { file: fp.file, line: fp.range.start.line + 1 };
  const notes: string[] = [];
  const unit = (modules: string[], reshard: boolean | null, isRoot = false): UnitPlan => ({
    modules,
    isRoot,
    reshardAfterForward: isRoot ? null : reshard,
    offload: fp.offload,
    origin,
    site,
  });
  let units: UnitPlan[];
  const w = fp.wrap;
  if (w.kind === 'none') units = [];
  else if (w.kind === 'root') units = [unit([''], null, true)];
  else if (w.kind === 'policy') {
    const classes = w.classes ?? (shape ? [shape.blockClass] : []);
    const present = classNamesOf(root);
    const missing = (w.classes ?? []).filter((c) => !present.has(c));
    if (missing.length) notes.push(`${missing.join(', ')} not found in the model: wraps nothing`);
    const base: WrapPolicyValue =
      w.minParams !== undefined
        ? { policy: 'size', minNumParams: w.minParams }
        : { policy: 'transformer', classes };
    const r = unitsFromPolicy(
      root,
      w.trainableLeaves
        ? {
            policy: 'or',
            text: "PEFT's fsdp_auto_wrap_policy",
            policies: [{ policy: 'lambda', text: 'lambda_policy_fn', predicate: TRAINABLE_LEAF }, base],
          }
        : base,
      {
        fallbackClasses: classes,
        origin,
        site,
        offload: fp.offload,
        reshardAfterForward: fp.reshardAfterForward ?? true,
      },
    );
    units = r.units.map((u) => (u.isRoot ? { ...u, reshardAfterForward: null } : u));
    if (fp.api === 'fsdp2')
      units = units.map((u) => (u.isRoot ? u : { ...u, reshardAfterForward: fp.reshardAfterForward }));
    if (!w.classes || w.classes.length || w.minParams !== undefined) notes.push(...r.notes);
    if (w.embedUnit) {
      // verl's `apply_fsdp2`: `fully_shard` on each block and on each nn.Embedding unless the embeddings are tied.
      const extras = accelerateExtras(root, shape);
      if (extras.embed) {
        const rootUnit = units.pop()!;
        units.push(unit([extras.embed], fp.reshardAfterForward), rootUnit);
      }
    }
    if (w.rootReshard !== undefined)
      units = units.map((u) => (u.isRoot ? { ...u, reshardAfterForward: w.rootReshard! } : u));
    if (w.hfExtras) {
      const extras = accelerateExtras(root, shape);
      const rootUnit = units.pop()!;
      if (extras.embed) units.push(unit([extras.embed], fp.reshardAfterForward));
      if (extras.tail.length) units.push(unit(extras.tail, false));
      units.push(rootUnit);
    }
  } else {
    const blocks = outermostOfClass(root, shape?.blockClass).map((m) => m.path);
    const group = (g: string[], reshard: boolean | null) => {
      const present = g.filter((p) => !!moduleAt(root, p));
      if (present.length < g.length)
        notes.push(`${g.filter((p) => !present.includes(p)).join(', ')}: no such module`);
      return present.length ? [unit(present, reshard)] : [];
    };
    units = [
      ...w.before.flatMap((g) => group(g, fp.reshardAfterForward)),
      ...blocks.map((b, i) =>
        unit(
          [b],
          i === blocks.length - 1 && w.lastBlockReshard !== undefined
            ? w.lastBlockReshard
            : fp.reshardAfterForward,
        ),
      ),
      ...w.after.flatMap((g) =>
        group(g, w.afterReshard !== undefined ? w.afterReshard : fp.reshardAfterForward),
      ),
      unit([''], null, true),
    ];
  }
  return {
    api: fp.api,
    strategy: fp.strategy,
    units,
    source: { kind: /\.pyi?$/.test(fp.file) ? 'detected' : 'config', detail: origin },
    notes: [...fp.notes, ...notes],
  };
}
