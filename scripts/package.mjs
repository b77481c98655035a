// Builds the VSIX: a minified build, then @vscode/vsce over the allow-list in .vscodeignore, run in a staging folder
// that holds what .vscodeignore lets in, the user README (README.md without its contributor section) and
// package.json without "files" (the npm package's allow-list, which vsce refuses beside a .vscodeignore).
//   npm run package [-- --out PATH]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const i = args.indexOf('--out');
const out = path.resolve(
  i >= 0 && args[i + 1] ? args[i + 1] : path.join(root, `${pkg.name}-${pkg.version}.vsix`),
);
fs.mkdirSync(path.dirname(out), { recursive: true });

/** Marks around README.md's contributor section, which the Marketplace page and the editor do not show. */
const OMIT_START = '<!-- vsix:omit-start';
const OMIT_END = '<!-- vsix:omit-end -->';

/** README.md as users read it: every marked contributor section dropped, one newline at the end. */
function userReadme(text) {
  const kept = [];
  let omitting = false;
  for (const line of text.split('\n')) {
    if (line.startsWith(OMIT_START)) {
      if (omitting) throw new Error(`README.md: "${OMIT_START}" inside an omitted section`);
      omitting = true;
    } else if (line.startsWith(OMIT_END)) {
      if (!omitting) throw new Error(`README.md: "${OMIT_END}" without a start`);
      omitting = false;
    } else if (!omitting) kept.push(line);
  }
  if (omitting) throw new Error(`README.md: "${OMIT_START}" without an end`);
  return (
    kept
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trimEnd() + '\n'
  );
}

/** The top-level files and folders .vscodeignore lets back in (`!dist/extension.js` lets in from dist). */
function allowedTops() {
  const lines = fs.readFileSync(path.join(root, '.vscodeignore'), 'utf8').split('\n');
  const tops = new Set();
  for (const l of lines.map((s) => s.trim())) {
    if (!l.startsWith('!')) continue;
    const top = l.slice(1).replace(/^\//, '').split('/')[0];
    if (top && !/[*?[]/.test(top)) tops.add(top);
  }
  return tops;
}

execFileSync(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--minify'], {
  cwd: root,
  stdio: 'inherit',
});

const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'fsdp-lens-vsix-stage-'));
try {
  fs.copyFileSync(path.join(root, '.vscodeignore'), path.join(stage, '.vscodeignore'));
  for (const top of allowedTops()) {
    if (top === 'package.json' || top === 'README.md') continue;
    const from = path.join(root, top);
    if (fs.existsSync(from)) fs.cpSync(from, path.join(stage, top), { recursive: true });
  }
  const manifest = { ...pkg };
  delete manifest.files;
  fs.writeFileSync(path.join(stage, 'package.json'), JSON.stringify(manifest, null, 2) + '\n');
  fs.writeFileSync(
    path.join(stage, 'README.md'),
    userReadme(fs.readFileSync(path.join(root, 'README.md'), 'utf8')),
  );

  const vsce = path.join(path.dirname(require.resolve('@vscode/vsce/package.json')), 'vsce');
  // The bundles hold every dependency: nothing from node_modules goes into the package. vsce points the README's
  // relative links and images at the repository named in package.json.
  execFileSync(process.execPath, [vsce, 'package', '--no-dependencies', '--out', out], {
    cwd: stage,
    stdio: 'inherit',
  });
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
console.log(out);
