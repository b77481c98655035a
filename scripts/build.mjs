// Bundles the extension, the command-line tool and the webview with esbuild, and places the WASM files beside
// them. `--tests` also bundles every test file into out/ (each test is one self-contained CommonJS file).
//   node scripts/build.mjs [--tests] [--watch] [--minify]
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = new Set(process.argv.slice(2));
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const minify = args.has('--minify');

const wasmFiles = [
  require.resolve('web-tree-sitter/web-tree-sitter.wasm', { paths: [root] }),
  path.join(
    path.dirname(require.resolve('tree-sitter-python/package.json', { paths: [root] })),
    'tree-sitter-python.wasm',
  ),
];

// Files the bundles load at run time: the parser's WebAssembly, exact mode's Python helper and
// The example the walkthrough opens (`FSDP: Open an example training script`).
const runtimeFiles = [
  ...wasmFiles,
  path.join(root, 'python', 'fsdp_lens_measure.py'),
  path.join(root, 'python', 'fsdp_lens_probe.py'),
  path.join(root, 'examples', 'train_llama_fsdp2.py'),
];

function copyWasm(dir) {
  fs.mkdirSync(dir, { recursive: true });
  for (const f of runtimeFiles) fs.copyFileSync(f, path.join(dir, path.basename(f)));
}

/** @type {esbuild.BuildOptions} */
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: true,
  minify,
  loader: { '.scm': 'text' },
  // The CommonJS build of web-tree-sitter: its ES module build needs import.meta, which a CJS bundle lacks.
  alias: { 'web-tree-sitter': require.resolve('web-tree-sitter', { paths: [root] }) },
  logLevel: 'warning',
  // ES module builds first: jsonc-parser's CommonJS build is a UMD wrapper whose dynamic requires do not bundle.
  mainFields: ['module', 'main'],
  define: { __VERSION__: JSON.stringify(pkg.version) },
  absWorkingDir: root,
};

const builds = [
  {
    ...common,
    entryPoints: ['src/extension/extension.ts'],
    outfile: 'dist/extension.js',
    external: ['vscode'],
  },
  {
    // The analysis worker: the extension host starts it as a thread and sends it every analysis.
    ...common,
    entryPoints: ['src/worker/main.ts'],
    outfile: 'dist/worker.js',
  },
  {
    ...common,
    entryPoints: ['src/cli/main.ts'],
    outfile: 'dist/cli.js',
    banner: { js: '#!/usr/bin/env node' },
  },
];
if (fs.existsSync(path.join(root, 'src/webview/panel.ts'))) {
  builds.push({
    ...common,
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    entryPoints: ['src/webview/panel.ts'],
    outfile: 'dist/panel.js',
  });
}

function testEntries(dir) {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs
    .readdirSync(abs, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
}

if (args.has('--tests')) {
  builds.push({
    ...common,
    entryPoints: testEntries('test/unit'),
    outdir: 'out/test/unit',
    outbase: 'test/unit',
    // esbuild runs its own binary from its install folder: a test that bundles code loads it from node_modules.
    external: ['vscode', 'esbuild'],
  });
  builds.push({
    ...common,
    entryPoints: testEntries('test/integration'),
    outdir: 'out/test/integration',
    outbase: 'test/integration',
    external: ['vscode', 'mocha', 'playwright-core', '@vscode/test-electron'],
  });
  builds.push({
    ...common,
    entryPoints: ['test/bench/bench.ts'],
    outdir: 'out/test/bench',
    outbase: 'test/bench',
    external: ['vscode', 'playwright-core'],
  });
}

const start = Date.now();
copyWasm(path.join(root, 'dist'));
if (args.has('--tests')) copyWasm(path.join(root, 'out/test'));
if (args.has('--watch')) {
  for (const b of builds) await (await esbuild.context(b)).watch();
  console.log('watching…');
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
  fs.chmodSync(path.join(root, 'dist/cli.js'), 0o755);
  console.log(`built ${builds.length} bundles in ${Date.now() - start} ms`);
}
