/** The facts the scan finds in one Python file, as plain data with source ranges: the input of every later stage. */
import type { PlainValue } from '../python/plain';
import type { Position, Range } from '../vocabulary/range';
import type { MeshValue } from './options';

/**
 * What the scan finds in one Python file, as plain data with source ranges: the input of resolution, the
 * estimator, the lint rules and every surface. Lines are 1-based; ranges are 0-based (VS Code's convention).
 */
export interface FileFacts {
  path: string;
  calls: WrapCall[];
  meshes: MeshFact[];
  optimizers: OptimizerFact[];
  models: ModelFact[];
  checkpointing: CheckpointFact[];
  /** Other facts later stages read: LoRA, quantisation, frozen modules, dtype casts, gradient-sync toggles. */
  training: TrainingFact[];
  /** `# fsdp: key=value ...` annotation comments. */
  annotations: AnnotationFact[];
  /** `# noqa` comments, by 0-based line: the codes listed, or null for a bare `# noqa`. */
  noqa: Record<number, string[] | null>;
  /** Every import binding of the file (rules read them to rewrite or add imports). */
  imports: ImportFact[];
  /** The functions that hold wrap calls: their parameters, and whether this file calls them. */
  functions: Record<string, FunctionFact>;
  /** `MixedPrecisionPolicy(...)` / `MixedPrecision(...)` bound to a variable, and whether the variable is used again. */
  mixedPrecision: MixedPrecisionFact[];
  /** Classes a `ModuleList` / `Sequential` of this file repeats (`nn.ModuleList([Block(c) for _ in ...])`). */
  blockClasses: string[];
  /** Problems that kept the scan from reading part of the file. */
  problems: ScanProblem[];
  /**
   * Constructor calls of frameworks that configure FSDP: Transformers' `TrainingArguments` and TRL's configs,
   * Accelerate's `FullyShardedDataParallelPlugin` and `Accelerator` (its `mixed_precision`), Lightning's
   * `FSDPStrategy`, `Trainer` and `Fabric`, TRL's trainers (`SFTTrainer(model="org/name")`).
   */
  frameworkCalls: FrameworkCallFact[];
  /** Calls of the file's wrapping methods that are not followed (the receiver's class unknown), and inferences made. */
  methodNotes: string[];
  /**
   * Python objects that configure a framework's job, parallelism included (`ParallelismConfig(...)`,
   * `TransformerDataParallelConfig(name=...)`), which the analysis does not read: named, so that a file made of
   * them is said to configure a job rather than to hold nothing.
   */
  jobConfigs?: { callee: string; line: number }[];
  /** Configuration files the code loads by a path it writes, read for its values (`configs/train.yaml`). */
  configsRead?: string[];
  /**
   * Batch sizes and sequence lengths the code reads from its config (`args.data.batch_size`), with their values:
   * not the model's input (what the model is fed decides), but what an estimate that cannot see it names.
   */
  inputReads?: { kind: 'batch' | 'seq'; text: string; value: number; line: number }[];
  /** The script's own command line given to the analysis, when one was, and the options read from it. */
  argv?: readonly string[];
  argsRead?: string[];
  /** Where that command line was read (`run.sh:3`), when a launch file of the project gave it. */
  argvFrom?: string;
  /**
   * Calls of FSDP1's runtime API (`model.no_sync()`, `model.clip_grad_norm_(...)`, `FSDP.state_dict_type(...)` and
   * the other state-dict functions, `summon_full_params`), and `state_dict()` / `load_state_dict()` of the modules
   * the file wraps with `FullyShardedDataParallel`: what the migration to FSDP2 rewrites or names. Absent when none.
   */
  fsdp1Calls?: Fsdp1CallFact[];
}

export interface FrameworkCallFact {
  /** What is constructed (the class name as imported). */
  kind:
    | 'TrainingArguments'
    | 'FullyShardedDataParallelPlugin'
    | 'FSDPStrategy'
    | 'ModelParallelStrategy'
    | 'LightningTrainer'
    | 'Fabric'
    | 'Accelerator'
    | 'TrlTrainer';
  /** The fully qualified callee (`transformers.TrainingArguments`, `trl.SFTConfig`). */
  callee: string;
  line: number;
  range: Range;
  /** Keyword arguments as read (positional ones are rare for these constructors and left out). */
  kwargs: Record<string, PlainValue>;
  /** Line of each keyword argument, for findings and assumptions. */
  kwargLines: Record<string, number>;
}

export interface FunctionFact {
  line: number;
  /** 1-based last line of the function. */
  end: number;
  /** The class the function is a method of: its qualified name and its lines. */
  owner?: { name: string; line: number; end: number };
  parameters: string[];
  /** Called somewhere in this file (otherwise its callers live in other files). */
  calledInFile: boolean;
  /** It calls itself (`walk(child)` inside `def walk(module)`): its parameters take more values than its callers'. */
  recursive?: true;
  /** Handed as a value to a call of the file instead of called (`applier(module, wrap)`): that call's text. */
  handedTo?: string;
}

export interface MixedPrecisionFact {
  api: 'MixedPrecisionPolicy' | 'MixedPrecision';
  variable: string | null;
  line: number;
  range: Range;
  /** The variable is read after its assignment (passed on, directly or through another name). */
  used: boolean;
}

export type WrapApi = 'fully_shard' | 'FSDP' | 'wrap';

export interface OptionFact {
  /** The argument's source text. */
  text: string;
  /** The resolved value as JSON (numbers, strings, booleans, objects describing policies), or null. */
  value: unknown;
  range: Range;
  /** Where the value came from when it is not written inline (`mp_policy` bound at line 12, `**cfg` key). */
  via?: string;
  /** The option is set only under these conditions (a key added to a `**config` dict inside an `if`). */
  conditions?: string[];
  /** Set for every wrap by an enclosing block rather than at the call (`with enable_wrap(...)`). */
  inherited?: 'enable_wrap';
}

export interface LoopFact {
  /** The loop target as written (`layer`, `layer_id, block`). */
  target: string;
  /** The iterable as written (`model.layers.items()`). */
  iterable: string;
  /** Where the target is written (a fix may rewrite it). */
  targetRange: Range;
  line: number;
  range: Range;
}

/**
 * One `if` statement a fact runs under, from the enclosing function (or the module) down: the statement's start
 * offset and the arms the fact can run in (0 the first arm, then each `elif` and the `else`; an `if` without `else`
 * numbers "no arm taken" after its last arm). A fact inside an arm names that arm; one after an `if` some arm of
 * which always returns or raises names the arms that fall through. Facts whose steps for one `if` share no arm can
 * never both run in one pass.
 */
export interface BranchStep {
  at: number;
  arms: number[];
}

/** Two positions that can never both run in one call of their function: some `if` puts them in disjoint arms. */
export function exclusive(a: BranchStep[] | undefined, b: BranchStep[] | undefined): boolean {
  if (!a?.length || !b?.length) return false;
  for (const x of a)
    for (const y of b) if (x.at === y.at && !x.arms.some((arm) => y.arms.includes(arm))) return true;
  return false;
}

/** `isinstance(x, Cls)` tested around a fact: the object, the classes (qualified when imported), negated or not. */
export interface TypeTest {
  subject: string;
  classes: string[];
  /** The fact runs where the test is false (an `else` arm, `if not isinstance(...)`, after an early return). */
  negated: boolean;
}

export interface WrapCall {
  api: WrapApi;
  /** The file the call is in (the path the scan was given): with `line`, the call's identity across files. */
  file: string;
  /** 1-based line of the call. */
  line: number;
  range: Range;
  /** The callee as written (`fully_shard`, `tdf.fully_shard`, `FSDP`). */
  callee: string;
  calleeRange: Range;
  /** Source text of the wrapped expression (a list's text for `fully_shard([a, b])`). */
  target: string;
  targetRange: Range | null;
  /** End of the last argument (where a fix appends `, name=value`), or null for an empty argument list. */
  argumentsEnd: Position | null;
  /** The elements of a list argument (one unit holding all of them); a single-element list otherwise. */
  targets: string[];
  /** Module path of the wrapped object relative to a variable, with `*` for every child of a loop's iterable. */
  paths: string[][];
  /**
   * The paths as if a rebinding of the wrapped object's name under tests of its own had not run (`if
   * hasattr(model, "module"): model = model.module`): the plan takes them when `paths` name no module of the model
   * and these do, since a wrap of a missing attribute raises.
   */
  unlessRebound?: { paths: string[][]; test: string; line: number };
  /**
   * The wrap looks up each module by a name taken from a parameter's entries (`for path, reshard in plan:
   * fully_shard(get_module(model, path))`): the parameter, the name's place in an entry (-1: the entry itself), the
   * path the names are relative to, and the loop's targets. The caller's argument names the modules.
   */
  namedBy?: { param: string; place: number; base: string[]; targets: string[] };
  /** The innermost enclosing loop, and all of them outermost first. */
  loop: LoopFact | null;
  loops: LoopFact[];
  /** Source text of the `if` conditions the call sits under, outermost first. */
  conditions: string[];
  /** Inside the body of a `try` within its function: an error it raises may be caught. */
  inTry?: true;
  /** The `if` arms the call runs in, within its function. */
  branch: BranchStep[];
  /** The enclosing function (`Trainer.setup`), or null at module level. */
  function: string | null;
  /** The module the API was imported from, or null when the file does not import it. */
  importPath: string | null;
  /** Imported through `torch.distributed._composable.fsdp`. */
  legacy: boolean;
  options: Record<string, OptionFact>;
  /** `**mapping` arguments whose keys could not all be read. */
  unresolvedSplats: string[];
  /** The variable the result is assigned to (`model = FSDP(model, ...)`). */
  assignedTo: string | null;
  /** This call wraps an object whose children other calls wrap (the root of the plan). */
  isRoot: boolean;
  /** Indices (into `calls`) of the calls that wrap children of this call's target. */
  children: number[];
  /** Byte offsets of the statement holding the call, and its indentation, for quick fixes. */
  statement: { start: number; end: number; range: Range; indent: string };
  /** The outermost loop's statement when the call is in a loop (a fix inserts after it). */
  loopStatement: { start: number; end: number; range: Range; indent: string } | null;
  /** Read from code that does not parse yet (half-typed): only the callee and target are known. */
  incomplete?: boolean;
  /** Classes an enclosing `isinstance(<target>, Cls)` test restricts the wrapped module to (null: no test). */
  classFilter: string[] | null;
  /** Classes an enclosing test keeps out (`if isinstance(m, nn.ModuleList): continue`). */
  classExclude?: string[];
  /**
   * In a loop over `X.modules()` / `X.named_modules()`, which yield X itself first, with no test that can keep X
   * out: the call wraps X too (its path is X's followed by `**`).
   */
  wrapsBase?: true;
  /**
   * The tests that picked the modules of a list the call's loop runs over (`[m for m in model.modules() if
   * test]`, or `mods.append(m)` under a test): the plan takes only the modules they hold for, or none.
   */
  pickedBy?: string;
  /** Why the call can never run, when the scan can tell (a condition that is always false). */
  neverRuns?: string;
  /** Set when the call is off on the default path: a condition false by a default a command line may change. */
  offByDefault?: string;
  /**
   * The variables the first name of the wrapped path is computed from by a call (`decoder = find_decoder(net)`:
   * `net`): a wrap of one of them may hold this module.
   */
  baseDerivedFrom?: string[];
  /** Tests around the call (outside its loops) the analysis cannot decide: it is estimated as if they held. */
  undecided?: string[];
  /** The arguments to add to the script's command line that put the call on the path it takes (`--fsdp1`). */
  runsWith?: string[];
  /** Inside `with enable_wrap(...)` (FSDP1 manual wrapping): the options that block sets. */
  enableWrap?: Record<string, OptionFact>;
  /**
   * A wrap made by calling a method of the file's own classes (`block.apply_fsdp(mesh)`, whose body wraps `self`):
   * the method, and the line of the wrap call in its body. The call stands at the method's call, `self` replaced.
   */
  via?: { method: string; line: number };
  /** A wrap of `self` in a method that calls in this file expand (their lines): each call is the unit, not this. */
  expandedAt?: number[];
}

/** One call of FSDP1's runtime API (or a state-dict method of an FSDP1-wrapped module), as written. */
export interface Fsdp1CallFact {
  /** The method (`no_sync`, `clip_grad_norm_`, `state_dict_type`, `optim_state_dict`, `state_dict` ...). */
  method: string;
  /**
   * Called through the class (`FSDP.optim_state_dict(model, optim)`): the module is the argument FSDP1's signature
   * puts it at (the first; the second of `scatter_full_optim_state_dict(full_osd, model)` and its kin).
   */
  onClass: boolean;
  /** The module it acts on as written (the receiver, or a class call's module argument), and where; null if none. */
  module: string | null;
  moduleRange: Range | null;
  /** The callee as written (`model.no_sync`, `FSDP.state_dict_type`), and where. */
  callee: string;
  calleeRange: Range;
  /** The arguments after the module, in order. */
  args: Fsdp1ArgumentFact[];
  /** Just inside the opening parenthesis: where a new first argument goes. */
  argumentsStart: Position;
  line: number;
  range: Range;
  /** How its value is used: its own statement, the right side of `x = ...`, a `with` item, or in an expression. */
  use: 'statement' | 'assigned' | 'with' | 'expression';
  /** The `with` statement the call is the item of (`use` is `with`). */
  block?: WithBlockFact;
  /**
   * Index (in `fsdp1Calls`) of the call whose `with` block runs this one: the innermost such block around it, not
   * counting through a `def`, `class` or `lambda` (whose body runs later).
   */
  heldBy?: number;
  /** The enclosing function (`Trainer.save`), or null at module level. */
  function: string | null;
}

export interface Fsdp1ArgumentFact {
  /** The keyword (`strict`), `*` / `**` for an unpacked argument, or null for a positional one. */
  name: string | null;
  text: string;
  range: Range;
  /** The value as far as the scan reads it (`true`, `{ ref: 'torch...StateDictType.FULL_STATE_DICT' }`, a call). */
  value: PlainValue;
}

/** A `with` statement whose item is an FSDP1 call: its shape, and what its body does that a rewrite must keep. */
export interface WithBlockFact {
  /** Items of the statement (`with a(), b():` has two). */
  items: number;
  /** The call's item binds a name (`with model.no_sync() as ctx:`). */
  alias: boolean;
  async: boolean;
  /**
   * The item is `call if test else other` (`callWhen` true) or `other if test else call`: the block enters the call
   * only where the test holds (fails). `nullcontext` when the other arm is `contextlib.nullcontext()`.
   */
  conditional?: {
    test: string;
    /** The test's node type (`not_operator`, `comparison_operator`, `identifier` ...). */
    testType: string;
    /** The test is a `bool` as written (a comparison, a `not`, `True`), or a name last bound to one. */
    testIsBool: boolean;
    /** The operand of a `not` test, and whether it is a `bool` so. */
    notOperand?: { text: string; isBool: boolean };
    callWhen: boolean;
    nullcontext: boolean;
  };
  /** 0-based line of the `with` keyword, and the indentation of that line. */
  start: number;
  indent: string;
  /** Just after the header's `:`. */
  headerEnd: Position;
  /** The body: where it starts and ends, the indentation of its first statement, and whether it follows the `:`. */
  body: { start: Position; end: Position; indent: string; inline: boolean };
  /** The body holds a string over several lines (re-indenting its lines would change the string). */
  multilineString: boolean;
  /** The body leaves the block early: a `return`, or a `break` / `continue` of a loop around the statement. */
  exits: boolean;
  /** The body defines a function, class or lambda (code that runs later, outside the block, or inside it unseen). */
  defines: boolean;
  /**
   * Where the body reads the names the file wraps with `FullyShardedDataParallel` or the block's module (`model`,
   * `self`): the dotted name as written, whether it is called (`self.save()`), and where.
   */
  reads: { text: string; called: boolean; range: Range }[];
  /** The body holds more such reads than `reads` keeps. */
  readsCut?: true;
  /** The body is larger than the scan reads: nothing above about it is known. */
  unread?: true;
}

export interface MeshFact {
  /** The variable the mesh is bound to, if any. */
  name: string | null;
  line: number;
  range: Range;
  api: 'init_device_mesh' | 'DeviceMesh';
  deviceType: string | null;
  /** Mesh shape when known (`[8]`, `[2, 8]`); null entries for unknown sizes. */
  shape: (number | null)[] | null;
  shapeText: string;
  dimNames: string[] | null;
  function: string | null;
}

export interface OptimizerFact {
  /** Class name (`AdamW`) and its qualified name. */
  name: string;
  qualified: string;
  family: string;
  line: number;
  range: Range;
  statement: { start: number; end: number; range: Range; indent: string };
  /** The parameters argument as written (`model.parameters()`). */
  paramsText: string;
  /** The variable whose parameters it takes (`model`), when it reads `X.parameters()`. */
  target: string | null;
  function: string | null;
  /** The `if` arms the construction runs in, within its function. */
  branch: BranchStep[];
  options: Record<string, OptionFact>;
}

export interface ModelFact {
  /** The variable the model is bound to. */
  variable: string | null;
  line: number;
  range: Range;
  /** The class or factory as written (`Transformer`, `AutoModelForCausalLM.from_pretrained`). */
  callee: string;
  qualified: string;
  /** `from_pretrained("org/name")` / `from_config`: the Hugging Face id when constant. */
  pretrained: string | null;
  /** Where the id came from when it is a default a command line may change (`the default of --model at line 5`). */
  pretrainedVia?: string;
  /** Built under `with torch.device("meta")`. */
  meta: boolean;
  /** A dtype passed when loading (`torch_dtype=torch.bfloat16`). */
  dtype: string | null;
  /** `torch_dtype="auto"` (`dtype="auto"`): loaded in the dtype the checkpoint was saved in. */
  dtypeAuto?: true;
  args: Record<string, OptionFact>;
  function: string | null;
}

export interface CheckpointFact {
  api:
    | 'checkpoint_wrapper'
    | 'apply_activation_checkpointing'
    | 'checkpoint'
    | 'checkpoint_sequential'
    | 'gradient_checkpointing_enable';
  line: number;
  range: Range;
  /** The callee as written (`checkpoint_wrapper`, `ptd_checkpoint_wrapper`). */
  callee: string;
  text: string;
  loop: LoopFact | null;
  function: string | null;
  options: Record<string, OptionFact>;
  /** The file it is written in, when it is a helper's (`apply_ac(model)` in another file): named in the source. */
  file?: string;
  /** Why it can never run (a test false as written), or is off on the default path (a default turns it off). */
  neverRuns?: string;
  offByDefault?: string;
  /** Tests around it not known statically: estimated as if they held, and said. */
  undecided?: string[];
}

export interface TrainingFact {
  kind:
    | 'lora'
    | 'peft'
    | 'quantization'
    | 'freeze'
    | 'cast'
    | 'no_sync'
    | 'requires_gradient_sync'
    | 'forward_prefetch'
    | 'grad_accum'
    | 'set_reshard_after_backward'
    | 'clip_grad_norm'
    | 'state_dict_options'
    | 'data_loader'
    | 'model_input'
    | 'tensor_parallel'
    | 'model_loss'
    | 'compile'
    | 'optimizer_in_backward'
    | 'activation_offload';
  line: number;
  range: Range;
  text: string;
  options: Record<string, OptionFact>;
  /** Positional arguments as written. */
  positional: string[];
  /** The object acted on (`model`, `model.embed_tokens`). */
  target: string | null;
  /** The callee, fully qualified when imported (`torch.nn.utils.clip_grad_norm_`). */
  qualified: string;
  /** For casts: the dtype the module is cast to. */
  dtype?: string;
  /** Conditions not known to hold: undecided ones, or why the fact is off (false as written, or by a default). */
  /** Tests it runs under that are not decided, or why it is off; with the arguments that take its path. */
  runsWhen?: { undecided?: string[]; off?: string; runsWith?: string[] };
  /** For a model's `loss` read: the output is kept by a name across steps (training.ts `modelLossReads`). */
  held?: 'backward' | 'step';
  /** Defaults its options were read from (`the default of --batch-size at line 12`): a command line may change them. */
  defaults?: string;
  function: string | null;
  /** The `if` arms the call runs in, within its function. */
  branch: BranchStep[];
  /** `isinstance` tests around the call (present when there are any). */
  typeTests?: TypeTest[];
  /** For token ids made up in the script (`torch.randint(0, V, (B, S))`): their shape, when known. */
  shape?: number[];
  /** The callees the value is passed to (`model` of `model(x)`, `model(input_ids=x)`). */
  fedTo?: string[];
  /** For `parallelize_module`: the module, its mesh and its plan as written. */
  tensorParallel?: TensorParallelFact;
}

/** One `parallelize_module(module, mesh, plan)` call: what it parallelizes, over which mesh, with which styles. */
export interface TensorParallelFact {
  module: string | null;
  mesh: MeshValue | null;
  /** The plan's entries, or null with why it is not known statically. */
  plan: TensorParallelEntry[] | null;
  planWhy?: string;
}

/** A plan entry: the submodule's name relative to the module (`attention.wq`; '' for the module itself) and its style. */
export interface TensorParallelEntry {
  key: string;
  /** `ColwiseParallel` and torchao's `Float8ColwiseParallel` are colwise, and so on; other styles are `other`. */
  style: 'colwise' | 'rowwise' | 'sequence' | 'prepare' | 'other';
  /** The style's class as written. */
  callee: string;
  /** `output_layouts=`: replicated (`Replicate()`), sharded (`Shard(d)`), or not given. */
  outputs: 'replicate' | 'shard' | null;
}

export interface AnnotationFact {
  line: number;
  range: Range;
  /** Parsed `key=value` pairs. */
  values: Record<string, string>;
  /** Tokens that are not `key=value`. */
  invalid: string[];
}

export interface ImportFact {
  local: string;
  qualified: string;
  line: number;
  /** 1-based last line of the import statement (parenthesised imports span several). */
  endLine: number;
  /** At module level (not inside a function or class). */
  topLevel: boolean;
  /** The `from` module's text and offsets (for rewriting a legacy path). */
  from?: { start: number; end: number; text: string; range: Range };
  legacy: boolean;
  /** The module path the fix should write in place of `from` (absent when no mechanical rewrite is safe). */
  rewrite?: string;
  /**
   * A fallback run only where the preferred import is unavailable: in the `except` clause of a `try` import, or in
   * an arm of an `if` that checks the PyTorch version (or `hasattr`) whose other arm imports from the public path.
   */
  fallback?: boolean;
}

export interface ScanProblem {
  message: string;
  line: number | null;
  severity: 'error' | 'warning' | 'info';
  /** A syntax error: where the parser first failed, and what it found there. */
  syntax?: { range: Range; found: string };
}

/** Facts of a file with nothing in it (not analysed, or empty). */
export function emptyFacts(path: string): FileFacts {
  return {
    path,
    calls: [],
    meshes: [],
    optimizers: [],
    models: [],
    checkpointing: [],
    training: [],
    annotations: [],
    noqa: {},
    imports: [],
    functions: {},
    mixedPrecision: [],
    blockClasses: [],
    problems: [],
    frameworkCalls: [],
    methodNotes: [],
  };
}

export type { PlainValue };
