/** Constructors of the frameworks that configure FSDP (Transformers, TRL, Accelerate, Lightning), told apart from same-named classes by where they are imported from, with their keyword arguments as plain data. */
import type { Node } from '../parsing/python';
import { type SourceFile, rangeOf } from '../parsing/source';
import { type PlainValue, toPlain } from '../python/plain';
import { type Evaluator } from './evaluator';
import type { FrameworkCallFact } from './facts';

/** `# fsdp: model=path:Class world_size=8 gpu=h100-sxm-80gb` comments. */
/** Constructors of frameworks that configure FSDP, by class name. */
export const FRAMEWORK_WORDS: Record<string, FrameworkCallFact['kind']> = {
  TrainingArguments: 'TrainingArguments',
  Seq2SeqTrainingArguments: 'TrainingArguments',
  SFTConfig: 'TrainingArguments',
  DPOConfig: 'TrainingArguments',
  GRPOConfig: 'TrainingArguments',
  ORPOConfig: 'TrainingArguments',
  KTOConfig: 'TrainingArguments',
  CPOConfig: 'TrainingArguments',
  RewardConfig: 'TrainingArguments',
  PPOConfig: 'TrainingArguments',
  FullyShardedDataParallelPlugin: 'FullyShardedDataParallelPlugin',
  FSDPStrategy: 'FSDPStrategy',
  ModelParallelStrategy: 'ModelParallelStrategy',
  Trainer: 'LightningTrainer',
  Fabric: 'Fabric',
  Accelerator: 'Accelerator',
  SFTTrainer: 'TrlTrainer',
  DPOTrainer: 'TrlTrainer',
  GRPOTrainer: 'TrlTrainer',
  ORPOTrainer: 'TrlTrainer',
  KTOTrainer: 'TrlTrainer',
  CPOTrainer: 'TrlTrainer',
  RewardTrainer: 'TrlTrainer',
  PPOTrainer: 'TrlTrainer',
  OnlineDPOTrainer: 'TrlTrainer',
  RLOOTrainer: 'TrlTrainer',
};

/** A framework constructor, told apart from same-named classes by where it is imported from. */
export function frameworkKind(last: string, qualified: string): FrameworkCallFact['kind'] | undefined {
  const kind = FRAMEWORK_WORDS[last];
  if (!kind) return undefined;
  const lightning = /^(lightning|pytorch_lightning|lightning_fabric)\b/.test(qualified);
  switch (kind) {
    case 'LightningTrainer':
    case 'Fabric':
    case 'ModelParallelStrategy':
      return lightning ? kind : undefined;
    case 'FSDPStrategy':
      return lightning || qualified === last ? kind : undefined;
    case 'TrainingArguments':
      return /^(transformers|trl)\b/.test(qualified) || qualified === last ? kind : undefined;
    case 'FullyShardedDataParallelPlugin':
      return /^accelerate\b/.test(qualified) || qualified === last ? kind : undefined;
    case 'Accelerator':
      return /^accelerate\b/.test(qualified) ? kind : undefined;
    case 'TrlTrainer':
      return /^trl\b/.test(qualified) ? kind : undefined;
  }
}

export function frameworkCallFact(
  file: SourceFile,
  ev: Evaluator,
  call: Node,
  kind: FrameworkCallFact['kind'],
  callee: string,
): FrameworkCallFact {
  const kwargs: Record<string, PlainValue> = {};
  const kwargLines: Record<string, number> = {};
  for (const a of call.childForFieldName('arguments')?.namedChildren ?? []) {
    if (a.type !== 'keyword_argument') continue;
    const name = a.childForFieldName('name')?.text;
    const value = a.childForFieldName('value');
    if (!name || !value) continue;
    kwargs[name] = toPlain(ev.eval(value), { params: 'default' });
    kwargLines[name] = file.line(a);
  }
  // TRL's trainers take the model first (all but PPOTrainer, whose first parameter is `args`).
  const first = call.childForFieldName('arguments')?.namedChildren[0];
  if (
    kind === 'TrlTrainer' &&
    !('model' in kwargs) &&
    !/PPOTrainer$/.test(callee) &&
    first &&
    first.type !== 'keyword_argument' &&
    first.type !== 'list_splat' &&
    first.type !== 'dictionary_splat'
  ) {
    kwargs.model = toPlain(ev.eval(first), { params: 'default' });
    kwargLines.model = file.line(first);
  }
  return { kind, callee, line: file.line(call), range: rangeOf(call), kwargs, kwargLines };
}
