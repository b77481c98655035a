// Builds the VSIX: a minified build, then @vscode/vsce over the allow-list in .vscodeignore.
//   npm run package [-- --out PATH]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
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

execFileSync(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--minify'], {
  cwd: root,
  stdio: 'inherit',
});
const vsce = path.join(path.dirname(require.resolve('@vscode/vsce/package.json')), 'vsce');
// The bundles hold every dependency: nothing from node_modules goes into the package.
execFileSync(process.execPath, [vsce, 'package', '--no-dependencies', '--out', out], {
  cwd: root,
  stdio: 'inherit',
});
console.log(out);
