// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The stages of src/core, lowest first (docs/architecture.md explains each). A stage imports only the stages
 * below it; the rules generated from this list fail `npm run lint` on an import that goes up or sideways.
 */
export const CORE_STAGES = [
  'vocabulary',
  'hardware',
  'parsing',
  'model',
  'inputs',
  'python',
  'analysis',
  'project',
  'estimator',
  'whatif',
  'frameworks',
  'modules',
  'exact',
  'plan',
  'lint',
  'resolve',
  'report',
  'entry',
];

/** What each program outside the core may import, besides the core (the webview only what is pure data and words). */
const EDGES = {
  host: { forbid: ['cli', 'extension', 'webview', 'worker'] },
  cli: { forbid: ['extension', 'webview', 'worker'] },
  worker: { forbid: ['cli', 'extension', 'webview'] },
  // The extension host runs no analysis: it speaks to the worker through its protocol, and reads the host's disk
  // only through the worker.
  extension: {
    forbid: ['cli', 'webview', 'host'],
    extra: [
      {
        regex: '^\\.\\./worker/(?!protocol$)',
        message: 'src/extension speaks to the worker only through worker/protocol (docs/architecture.md).',
      },
    ],
  },
};

/** A relative import of folder `name` from anywhere below src (`../x`, `../../core/x`). */
const relative = (names) => `^(\\.\\./)+(${names.join('|')})(/|$)`;

const layerRules = [
  ...CORE_STAGES.map((stage, i) => {
    const above = CORE_STAGES.slice(i + 1);
    return {
      files: [`src/core/${stage}/**/*.ts`],
      rules: {
        'no-restricted-imports': [
          'error',
          {
            paths: [{ name: 'vscode', message: 'src/core is editor-independent.' }],
            patterns: [
              ...(above.length
                ? [
                    {
                      regex: relative(above),
                      message: `src/core/${stage} is below ${above.join(', ')}: it may not import them (docs/architecture.md).`,
                    },
                  ]
                : []),
              {
                regex: '^(\\.\\./)+(host|cli|extension|webview|worker)(/|$)',
                message:
                  'src/core reads files, the environment and processes only through the Host it is given.',
              },
              {
                regex: '^node:(fs|os|child_process|worker_threads|net|http|https)$',
                message:
                  'src/core reads files, the environment and processes only through the Host it is given.',
              },
            ],
          },
        ],
      },
    };
  }),
  ...Object.entries(EDGES).map(([folder, { forbid, extra = [] }]) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: relative(forbid), message: `src/${folder} may not import ${forbid.join(', ')}.` },
            ...extra,
          ],
        },
      ],
    },
  })),
  {
    // The webview is a program of its own: it receives plain data and imports only pure words and types.
    files: ['src/webview/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex:
                '^\\.\\./core/(?!vocabulary/bytes$|vocabulary/words$|report/panelProtocol$|report/fitCells$)',
              message:
                'The webview imports from the core only vocabulary/bytes, vocabulary/words, report/panelProtocol and report/fitCells (pure, browser-safe).',
            },
            { regex: '^\\.\\./(host|cli|extension)(/|$)', message: 'The webview runs in the browser.' },
          ],
        },
      ],
    },
  },
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      'out/**',
      '.vscode-test/**',
      'test-artifacts/**',
      'test/fixtures/**',
      'examples/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      eqeqeq: ['error', 'always'],
      'no-restricted-imports': 'off',
    },
  },
  ...layerRules,
  {
    files: ['scripts/**/*.mjs', 'test/**/*.mjs', '*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
