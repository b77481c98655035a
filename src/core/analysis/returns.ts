/**
 * What a call of one of the project's own functions returns, read from the function's body with its parameters
 * bound to the call's arguments: the `return` its known tests reach (a helper that builds a wrap policy,
 * `fsdp_auto_wrap_policy(model, [LlamaDecoderLayer])`). Undefined wherever the path through the body is not
 * decided statically.
 */
import { up, type Node } from '../parsing/python';
import { truthy } from '../python/operators';
import { NONE, type CallV, type Value } from '../python/values';
import type { Evaluator } from './evaluator';

/** Statements a body may hold before its `return` is reached; past it the return is not read. */
const MAX_STATEMENTS = 200;

export function returnedValue(ev: Evaluator, call: CallV): { ev: Evaluator; value: Value } | undefined {
  const target = ev.functionFor(call, (def, home) => boundArguments(def, call, home));
  if (!target) return undefined;
  const body = target.def.childForFieldName('body');
  if (!body) return undefined;
  const r = returnIn(target.ev, body.namedChildren, { left: MAX_STATEMENTS });
  return r === 'through' ? { ev: target.ev, value: NONE } : r ? { ev: target.ev, value: r } : undefined;
}

/**
 * The parameters of `def` as `call` binds them (Python's binding of positional and keyword arguments), defaults
 * evaluated where the function is defined. Undefined for methods, `*`/`**` arguments, and calls Python would
 * reject.
 */
function boundArguments(def: Node, call: CallV, home: Evaluator): Map<string, Value> | undefined {
  let p = up(def);
  while (p && p.type !== 'class_definition' && p.type !== 'module') p = up(p);
  if (p?.type === 'class_definition' || call.splats.length) return undefined;
  const out = new Map<string, Value>();
  const names: string[] = [];
  const defaults = new Map<string, Node>();
  let varArgs = false;
  let varKw = false;
  let keywordOnly = false;
  const positional: string[] = [];
  for (const param of def.childForFieldName('parameters')?.namedChildren ?? []) {
    switch (param.type) {
      case 'identifier':
        names.push(param.text);
        if (!keywordOnly) positional.push(param.text);
        break;
      case 'typed_parameter': {
        const id = param.namedChild(0);
        if (id?.type === 'identifier') {
          names.push(id.text);
          if (!keywordOnly) positional.push(id.text);
        } else if (id?.type === 'list_splat_pattern') varArgs = keywordOnly = true;
        else if (id?.type === 'dictionary_splat_pattern') varKw = true;
        break;
      }
      case 'default_parameter':
      case 'typed_default_parameter': {
        const name = param.childForFieldName('name');
        const value = param.childForFieldName('value');
        if (name?.type !== 'identifier' || !value) return undefined;
        names.push(name.text);
        if (!keywordOnly) positional.push(name.text);
        defaults.set(name.text, value);
        break;
      }
      case 'list_splat_pattern':
        varArgs = keywordOnly = true;
        break;
      case 'keyword_separator':
        keywordOnly = true;
        break;
      case 'dictionary_splat_pattern':
        varKw = true;
        break;
      case 'positional_separator':
      case 'comment':
        break;
      default:
        return undefined;
    }
  }
  if (call.args.length > positional.length && !varArgs) return undefined;
  call.args.forEach((a, i) => {
    const name = positional[i];
    if (name) out.set(name, a);
  });
  for (const [k, v] of Object.entries(call.kwargs)) {
    if (!names.includes(k)) {
      if (!varKw) return undefined;
      continue;
    }
    if (out.has(k)) return undefined;
    out.set(k, v);
  }
  for (const name of names) {
    if (out.has(name)) continue;
    const d = defaults.get(name);
    if (!d) return undefined;
    out.set(name, home.eval(d));
  }
  return out;
}

/**
 * The value of the `return` reached through `statements` (each `if` decided by its test), `'through'` when none
 * is, undefined when a test is not known or a return sits in a loop, `try` or `with`.
 */
function returnIn(
  ev: Evaluator,
  statements: Node[],
  budget: { left: number },
): Value | 'through' | undefined {
  for (const st of statements) {
    if (--budget.left < 0) return undefined;
    if (st.type === 'return_statement') {
      const e = st.namedChild(0);
      return e ? ev.eval(e) : NONE;
    }
    if (!returns(st)) continue;
    if (st.type !== 'if_statement') return undefined;
    const arm = armTaken(ev, st);
    if (arm === undefined) return undefined;
    if (!arm) continue;
    const r = returnIn(ev, arm.namedChildren, budget);
    if (r !== 'through') return r;
  }
  return 'through';
}

/** The block of the arm an `if` takes (null: none), undefined when a test it reaches is not known. */
function armTaken(ev: Evaluator, st: Node): Node | null | undefined {
  const first = truthy(ev.eval(st.childForFieldName('condition')!));
  if (first === undefined) return undefined;
  if (first) return st.childForFieldName('consequence');
  for (const alt of st.childrenForFieldName('alternative')) {
    if (alt.type === 'else_clause') return alt.childForFieldName('body');
    const c = alt.childForFieldName('condition');
    const t = c ? truthy(ev.eval(c)) : undefined;
    if (t === undefined) return undefined;
    if (t) return alt.childForFieldName('consequence');
  }
  return null;
}

/** Whether a statement holds a `return` of the function it is in (not of a function defined in it). */
function returns(st: Node): boolean {
  if (
    st.type === 'function_definition' ||
    st.type === 'class_definition' ||
    st.type === 'decorated_definition'
  )
    return false;
  return st.descendantsOfType('return_statement').some((r) => {
    for (let p = up(r); p && p.id !== st.id; p = up(p))
      if (p.type === 'function_definition' || p.type === 'lambda' || p.type === 'class_definition')
        return false;
    return true;
  });
}
