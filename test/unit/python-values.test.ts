// Conformance of the Python value model with Python itself: each expression is evaluated statically (the scan's
// evaluator over src/core/python) and by a real Python 3 interpreter; where the model gives a value it must be the
// value Python gives, and where Python raises the model must say unknown. A list of expressions the model must
// know keeps it from passing by knowing nothing, and fast-check adds random arithmetic, comparison and sequence
// expressions on a fixed seed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Evaluator } from '../../src/core/analysis/evaluator';
import { SourceFile } from '../../src/core/parsing/source';
import { readImports } from '../../src/core/python/imports';
import { LIMITS, str, type Value } from '../../src/core/python/values';
import { stringMethod } from '../../src/core/python/strings';
import { grammar } from './helpers';
import { skipUnless, tools } from '../tools';

/** Any Python 3 (FSDP_LENS_PYTHON, else python3 on PATH); without one the suite is skipped, under CI it fails. */
const PYTHON = tools().python3.python ?? process.env.FSDP_LENS_PYTHON ?? 'python3';

/** Values as tagged JSON, so that 1 and 1.0, lists and tuples stay apart. */
type Tagged = { t: string; v?: unknown };

/** Evaluates expressions in Python; each result tagged, or {t: 'error'} where Python raises. */
function python(exprs: string[]): Tagged[] {
  const program = `
import json, sys
def tag(v):
    if isinstance(v, bool): return {"t": "bool", "v": v}
    if isinstance(v, int): return {"t": "int", "v": v} if abs(v) <= 2**53 else {"t": "big"}
    if isinstance(v, float): return {"t": "float", "v": v} if v == v and abs(v) != float("inf") else {"t": "nan"}
    if isinstance(v, str): return {"t": "str", "v": v}
    if v is None: return {"t": "none"}
    if isinstance(v, list): return {"t": "list", "v": [tag(x) for x in v]}
    if isinstance(v, tuple): return {"t": "tuple", "v": [tag(x) for x in v]}
    if isinstance(v, dict): return {"t": "dict", "v": [[tag(k), tag(x)] for k, x in v.items()]}
    return {"t": "other"}
out = []
for e in json.load(sys.stdin):
    try:
        out.append(tag(eval(e, {"__builtins__": __builtins__}, {})))
    except Exception:
        out.append({"t": "error"})
print(json.dumps(out))
`;
  const stdout = execFileSync(PYTHON, ['-W', 'ignore', '-c', program], {
    input: JSON.stringify(exprs),
    maxBuffer: 64 << 20,
  });
  return JSON.parse(stdout.toString()) as Tagged[];
}

function tagged(v: Value): Tagged | null {
  switch (v.k) {
    case 'bool':
      return { t: 'bool', v: v.v };
    case 'num':
      return { t: v.int ? 'int' : 'float', v: v.v };
    case 'str':
      return { t: 'str', v: v.v };
    case 'none':
      return { t: 'none' };
    case 'seq': {
      if (v.kind === 'set') return null;
      const items = v.items.map(tagged);
      return items.every((x) => x) ? { t: v.kind, v: items } : null;
    }
    case 'dict': {
      const entries = v.entries.map((e) => [tagged(e.key), tagged(e.value)]);
      return entries.every(([a, b]) => a && b) ? { t: 'dict', v: entries } : null;
    }
    default:
      return null;
  }
}

/** Evaluates each expression with the scan's evaluator: its tagged value, or null when the model says unknown. */
async function statically(exprs: string[]): Promise<(Tagged | null)[]> {
  const g = await grammar();
  const text = exprs.map((e, i) => `v${i} = ${e}\n`).join('');
  const tree = g.parse(text);
  try {
    const file = new SourceFile('conformance.py', text, tree);
    const ev = new Evaluator(file, readImports(g, file));
    return tree.rootNode.namedChildren.map((stmt) => {
      const right = stmt.namedChild(0)?.childForFieldName('right');
      return right ? tagged(ev.eval(right)) : null;
    });
  } finally {
    tree.delete();
  }
}

async function check(exprs: string[], mustKnow: boolean): Promise<void> {
  const [ours, theirs] = [await statically(exprs), python(exprs)];
  exprs.forEach((e, i) => {
    const py = theirs[i]!;
    const v = ours[i];
    if (py.t === 'error' || py.t === 'big' || py.t === 'nan' || py.t === 'other') {
      assert.equal(v, null, `${e}: Python gives ${py.t}, the model ${JSON.stringify(v)}`);
      return;
    }
    if (v === null) {
      if (mustKnow) assert.fail(`${e}: the model does not know ${JSON.stringify(py)}`);
      return;
    }
    assert.deepEqual(v, py, e);
  });
}

const KNOWN = [
  // arithmetic, Python's way
  '7 // 2',
  '-7 // 2',
  '7 % -3',
  '-7 % 3',
  '7 / 2',
  '2 ** 10',
  '2 ** -1',
  '10 - 3 * 4',
  '(1 + 2) * 3',
  '7.5 // 2',
  '-7.5 % 2',
  '1 << 10',
  '1024 >> 3',
  '6 & 3',
  '6 | 3',
  '6 ^ 3',
  '~5',
  '-(-3)',
  '+4',
  'True + 1',
  'True * 3',
  'True & False',
  'True | False',
  '0x1F',
  '0o17',
  '0b101',
  '1_000_000',
  '1e3',
  '2.5e-1',
  // conversions and builtins
  'int("42")',
  'int(3.9)',
  'int(-3.9)',
  'float("2.5")',
  'str(12)',
  'str(1.0)',
  'str(True)',
  'bool(0)',
  'bool([])',
  'bool("x")',
  'abs(-3)',
  'min(3, 1, 2)',
  'max([4, 9, 2])',
  'sum([1, 2, 3])',
  'len("abc")',
  'len([1, 2])',
  'len({"a": 1})',
  'round(2.5)',
  'round(3.5)',
  'round(-0.5)',
  'any([0, 1])',
  'all([1, 0])',
  'list((1, 2))',
  'tuple([1, 2])',
  'list(range(3))',
  'list(range(1, 10, 3))',
  'list(range(5, 0, -2))',
  'list(enumerate("ab"))',
  'list(zip([1, 2], "ab"))',
  'list(reversed([1, 2, 3]))',
  'sorted([3, 1, 2])',
  'dict(a=1, b=2)',
  'dict([("a", 1)])',
  // strings and sequences
  '"ab" + "cd"',
  '"ab" * 3',
  '3 * "ab"',
  '[1] + [2]',
  '(1,) + (2, 3)',
  '[0] * 3',
  '2 * [1, 2]',
  '[1, [2, 3]]',
  '"a\\tb"',
  '"\\x41\\u00e9"',
  'r"a\\nb"',
  '"a" "b"',
  '[*[1, 2], 3]',
  '{"a": 1, **{"b": 2}}',
  '{"a": 1} | {"a": 2}',
  // comparisons, chains, identity, membership
  '1 < 2 < 3',
  '1 < 3 < 2',
  '3 > 2 >= 2',
  '1 == 1.0',
  '1 == True',
  '"a" < "b"',
  '"b" == "b"',
  '[1, 2] == [1, 2]',
  '[1] == (1,)',
  '(1, 2) == (1, 2)',
  '{"a": 1} == {"a": 1}',
  'None == 0',
  'None is None',
  '1 is None',
  'None is not None',
  '2 in [1, 2]',
  '3 not in [1, 2]',
  '"b" in "abc"',
  '"a" in {"a": 1}',
  '1 != 2',
  '"1" == 1',
  // boolean logic and conditionals
  '1 and 2',
  '0 and 2',
  '0 or 3',
  '"" or "x"',
  'not 0',
  'not [1]',
  '1 if True else 2',
  '1 if 0 else 2',
  '[] or [1]',
  'None or 5',
  // slices, Python's clamping
  '[1, 2, 3][:-1]',
  '[1, 2, 3, 4][1:3]',
  '"abcdef"[::2]',
  '[1, 2, 3][::-1]',
  '(1, 2, 3)[1:]',
  '[1, 2, 3][-5:10]',
  '"abc"[5:]',
  '[1, 2, 3, 4, 5][4:0:-2]',
  '[1, 2, 3, 4, 5][-1:-4:-1]',
  '[1, 2, 3][None:2]',
  // f-strings: plain fields and escaped braces
  'f"layers.{3}"',
  'f"{1 + 2}x{7 // 2}"',
  'f"a{{b}}{\'c\'}"',
  'f"{True}-{None}"',
  'f"{2.5}"',
  'f"{4 / 2}"',
  'f"{\'ab\' * 2}"',
];

const RAISES = [
  '1 / 0',
  '1 // 0',
  '1 % 0',
  '[1] + (2,)',
  '"a" + 1',
  'int("x")',
  '[][0]',
  '{}["a"]',
  'range(1, 2, 0)',
  '[1][::0]',
];

describe('the Python value model against Python', { skip: skipUnless('python3') }, () => {
  it('gives the values Python gives for every operator, builtin and literal form it knows', async () => {
    await check(KNOWN, true);
  });

  it('says unknown where Python raises', async () => {
    await check(RAISES, false);
    const unknown = await statically(RAISES);
    assert.deepEqual(
      unknown,
      RAISES.map(() => null),
    );
  });

  it('never disagrees with Python on random integer, string and list expressions', async () => {
    const atom = fc.oneof(
      fc.integer({ min: -20, max: 20 }).map(String),
      fc.constantFrom('True', 'False', 'None', '""', '"ab"', '[]', '[1, 2]', '(3,)', '2.5'),
    );
    const ops = [
      '+',
      '-',
      '*',
      '//',
      '%',
      '**',
      '<',
      '<=',
      '==',
      '!=',
      'and',
      'or',
      'in',
      'not in',
      'is',
      '&',
      '|',
    ];
    const expr = fc.letrec((tie) => ({
      e: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        atom,
        fc.tuple(tie('e'), fc.constantFrom(...ops), tie('e')).map(([a, op, b]) => `(${a} ${op} ${b})`),
        tie('e').map((a) => `(not ${a})`),
        tie('e').map((a) => `(-${a})`),
      ),
    })).e as fc.Arbitrary<string>;
    const samples = fc.sample(expr, { numRuns: 400, seed: 42 });
    await check(samples, false);
  });

  it('bounds the values it builds: doubling a list or a string past the limit is unknown, not an allocation', async () => {
    // 2^17 items and 2^21 characters: past LIMITS.items and LIMITS.chars.
    const list = await statically([
      `[0] * ${LIMITS.items + 1}`,
      `"x" * ${LIMITS.chars + 1}`,
      `[0] * ${LIMITS.items}`,
    ]);
    assert.equal(list[0], null);
    assert.equal(list[1], null);
    assert.equal((list[2] as { v: unknown[] }).v.length, LIMITS.items);
  });
});

describe("str methods against Python's", { skip: skipUnless('python3') }, () => {
  it('split, endswith, isdigit and the rest give what CPython gives on module names', () => {
    // Module names as named_modules() gives them, and the arguments tests of them pass.
    const names = fc.sample(
      fc
        .array(fc.constantFrom('model', 'layers', '0', '12', 'mlp', 'self_attn', 'q_proj', '', ' x '), {
          minLength: 1,
          maxLength: 5,
        })
        .map((parts) => parts.join('.')),
      { numRuns: 60, seed: 7 },
    );
    const calls: [string, string, (string | number | string[] | null)[]][] = [];
    for (const n of names)
      calls.push(
        [n, 'split', ['.']],
        [n, 'split', ['.', 1]],
        [n, 'rsplit', ['.', 1]],
        [n, 'split', []],
        [n, 'endswith', ['mlp']],
        [n, 'startswith', [['model.', 'layers']]],
        [n, 'isdigit', []],
        [n, 'strip', [' .']],
        [n, 'rstrip', ['0123456789']],
        [n, 'count', ['.']],
        [n, 'find', ['layers']],
        [n, 'replace', ['.', '/']],
        [n, 'lower', []],
      );
    const program = `
import json, sys
out = []
for s, m, args in json.load(sys.stdin):
    args = [tuple(a) if isinstance(a, list) else a for a in args]
    out.append(getattr(s, m)(*args))
print(json.dumps(out))
`;
    const expected = JSON.parse(
      execFileSync(PYTHON, ['-c', program], { input: JSON.stringify(calls) }).toString(),
    ) as unknown[];
    const value = (a: string | number | string[] | null): Value =>
      a === null
        ? { k: 'none' }
        : typeof a === 'number'
          ? { k: 'num', v: a, int: true }
          : typeof a === 'string'
            ? str(a)
            : { k: 'seq', kind: 'tuple', items: a.map((x) => str(x)) };
    const plain = (v: Value | undefined): unknown =>
      v?.k === 'seq' ? v.items.map(plain) : v && 'v' in v ? v.v : v?.k === 'none' ? null : undefined;
    calls.forEach(([s0, m, args], i) => {
      const got = plain(stringMethod(s0, m, args.map(value), ''));
      assert.deepEqual(got, expected[i], `${JSON.stringify(s0)}.${m}(${JSON.stringify(args)})`);
    });
  });
});
