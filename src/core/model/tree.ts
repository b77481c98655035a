/** Module trees with PyTorch's names and shapes: what every model reader builds and the estimator reads. */
import { DTYPE_BYTES, type DType } from '../vocabulary/dtypes';

export interface ParamInfo {
  /** Local name (`weight`). */
  name: string;
  /** Shape as PyTorch reports it (`nn.Linear(in, out).weight` is `[out, in]`); sharding splits dim 0. */
  shape: number[];
  numel: number;
  /** The parameter's own dtype; unset means the model's dtype. */
  dtype?: DType;
  /** Frozen parameters carry no gradient and no optimizer state. */
  trainable: boolean;
  /** Full path of the parameter this one is tied to (the same tensor, counted once). */
  tiedTo?: string;
  /** The dtype FSDP2 all-gathers it in and holds it gathered, where a tensor subclass decides (Float8). */
  gathersAs?: DType;
  /**
   * An expert's parameter under expert parallelism of this degree: the GPU holds it as one of its local experts,
   * and FSDP2 shards it over the shard group / degree (torchtitan's `efsdp` mesh), not the whole shard group.
   */
  expertParallel?: number;
}

export interface BufferInfo {
  name: string;
  shape: number[];
  numel: number;
  dtype: DType;
  /** Saved in the state dict (`persistent=True`), or not. Both take memory. */
  persistent: boolean;
}

/** One `nn.Module` of a model, with its own (direct) parameters and buffers. */
export interface ModuleNode {
  /** Attribute name in the parent (`q_proj`, `3`); empty for the root. */
  name: string;
  /** Dotted path from the root (`model.layers.3.self_attn.q_proj`); empty for the root. */
  path: string;
  className: string;
  params: ParamInfo[];
  buffers: BufferInfo[];
  children: ModuleNode[];
}

export function numelOf(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function joinPath(parent: string, name: string): string {
  return parent ? `${parent}.${name}` : name;
}

/** Every module, parents before children. */
export function* walk(node: ModuleNode): Generator<ModuleNode> {
  const stack = [node];
  while (stack.length) {
    const n = stack.pop()!;
    yield n;
    for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]!);
  }
}

/**
 * The outermost modules of class `className`, in model order (depth-first): a model's decoder blocks, not
 * descending into a block for blocks nested in it.
 */
export function outermostOfClass(root: ModuleNode, className: string | undefined): ModuleNode[] {
  const out: ModuleNode[] = [];
  if (!className) return out;
  const stack = [root];
  while (stack.length) {
    const m = stack.pop()!;
    if (m.className === className) {
      out.push(m);
      continue;
    }
    for (let i = m.children.length - 1; i >= 0; i--) stack.push(m.children[i]!);
  }
  return out;
}

/** Every class name that occurs in the tree. */
export function classNamesOf(root: ModuleNode): Set<string> {
  const out = new Set<string>();
  for (const m of walk(root)) out.add(m.className);
  return out;
}

/** Whether some module of the tree has attribute name `name` (`base_model`). */
export function hasModuleNamed(root: ModuleNode, name: string): boolean {
  for (const m of walk(root)) if (m.name === name) return true;
  return false;
}

/** The module at a dotted path, or undefined. */
export function moduleAt(root: ModuleNode, path: string): ModuleNode | undefined {
  if (!path) return root;
  let n: ModuleNode | undefined = root;
  for (const seg of path.split('.')) {
    n = n?.children.find((c) => c.name === seg);
    if (!n) return undefined;
  }
  return n;
}

/** Parameters counted once (tied parameters are the same tensor). */
export function countParams(root: ModuleNode, filter: (p: ParamInfo) => boolean = () => true): number {
  let n = 0;
  for (const m of walk(root)) for (const p of m.params) if (!p.tiedTo && filter(p)) n += p.numel;
  return n;
}

export function countBufferBytes(root: ModuleNode): number {
  let n = 0;
  for (const m of walk(root)) for (const b of m.buffers) n += Math.ceil(b.numel * DTYPE_BYTES[b.dtype]);
  return n;
}

/** A model that cannot be built as described: the message says which count or field and why. */
export class ModelError extends Error {}

/**
 * The most modules one tree may have. DeepSeek-V3 has about 63,000 (61 layers of 256 experts of 4 modules) and
 * Kimi K2 about 94,000; a tree this size is built in well under a second.
 */
export const MAX_MODULES = 150_000;

/**
 * The most elements one parameter or buffer may have: 2^40, two hundred times the largest tensor of any released
 * model (an embedding of 256,000 x 18,432 is 4.7e9). A shape past it is a mistake or a trap, not counted.
 */
export const MAX_TENSOR_ELEMENTS = 2 ** 40;

/**
 * Builds module trees with PyTorch's names and shapes: `linear(name, in, out)` creates a child module of class
 * `Linear` whose `weight` is `[out, in]`, as `nn.Linear` does.
 */
export class ModuleBuilder {
  readonly node: ModuleNode;

  private constructor(
    name: string,
    path: string,
    className: string,
    /** Modules the whole tree may still add (shared by every builder of one tree). */
    private readonly left: { modules: number },
  ) {
    this.node = { name, path, className, params: [], buffers: [], children: [] };
  }

  static root(className: string): ModuleBuilder {
    return new ModuleBuilder('', '', className, { modules: MAX_MODULES });
  }

  param(name: string, shape: number[], opts: { dtype?: DType; trainable?: boolean } = {}): this {
    const p: ParamInfo = { name, shape, numel: numelOf(shape), trainable: opts.trainable ?? true };
    if (opts.dtype) p.dtype = opts.dtype;
    this.node.params.push(p);
    return this;
  }

  buffer(name: string, shape: number[], dtype: DType, persistent = true): this {
    this.node.buffers.push({ name, shape, numel: numelOf(shape), dtype, persistent });
    return this;
  }

  child(name: string, className: string, build?: (b: ModuleBuilder) => void): ModuleBuilder {
    if (--this.left.modules < 0)
      throw new ModelError(
        `the model would have more than ${MAX_MODULES.toLocaleString('en-US')} modules, more than any real model`,
      );
    const b = new ModuleBuilder(name, joinPath(this.node.path, name), className, this.left);
    build?.(b);
    this.node.children.push(b.node);
    return b;
  }

  /** `nn.Linear(inFeatures, outFeatures, bias)`. */
  linear(name: string, inFeatures: number, outFeatures: number, bias = false, className = 'Linear'): this {
    this.child(name, className, (b) => {
      b.param('weight', [outFeatures, inFeatures]);
      if (bias) b.param('bias', [outFeatures]);
    });
    return this;
  }

  /** `nn.Embedding(num, dim)`. */
  embedding(name: string, num: number, dim: number, className = 'Embedding'): this {
    this.child(name, className, (b) => b.param('weight', [num, dim]));
    return this;
  }

  /** A norm with a weight of `dim` (and a bias for LayerNorm-style norms). */
  norm(name: string, dim: number, className: string, bias = false): this {
    this.child(name, className, (b) => {
      b.param('weight', [dim]);
      if (bias) b.param('bias', [dim]);
    });
    return this;
  }

  /** `nn.ModuleList` of `n` modules built by `build(i)`. */
  list(name: string, n: number, className: string, build: (b: ModuleBuilder, i: number) => void): this {
    this.child(name, 'ModuleList', (l) => {
      for (let i = 0; i < n; i++) l.child(String(i), className, (b) => build(b, i));
    });
    return this;
  }

  /** Marks `path.name` of this tree as tied to `target` (a full parameter path). */
  tie(modulePath: string, paramName: string, target: string): this {
    const m = moduleAt(this.node, modulePath);
    const p = m?.params.find((x) => x.name === paramName);
    if (p) p.tiedTo = target;
    return this;
  }
}
