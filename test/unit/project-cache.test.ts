// The project's caches across versions of a file: a re-parsed file never leaves a memo holding the old tree.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { Project } from '../../src/core/project/project';
import { diskFS } from '../../src/host/disk';
import type { FileSystem } from '../../src/core/vocabulary/host';
import { grammar } from './helpers';

/** The disk, with the text and version of some files replaced, as the editor's open documents do. */
function overlay(files: Map<string, { text: string; version: string }>): FileSystem {
  return {
    ...diskFS,
    readFile: (f) => files.get(path.resolve(f))?.text ?? diskFS.readFile(f),
    version: (f) => files.get(path.resolve(f))?.version ?? diskFS.version(f),
    isDirectory: (d) => diskFS.isDirectory(d),
    entries: (d) => diskFS.entries(d),
    realPath: (p) => diskFS.realPath(p),
    refusal: (f) => diskFS.refusal(f),
  };
}

describe('the callers of a function when a calling file is opened in the editor', () => {
  it('are found again in the new version of the file, not read from a tree that was freed', async () => {
    const root = path.resolve('/virtual-project');
    const train = path.join(root, 'train.py');
    const helper = path.join(root, 'helper.py');
    const files = new Map([
      [helper, { text: 'def wrap(model):\n    return model\n', version: 'v1' }],
      [train, { text: 'from helper import wrap\nwrap(model)\n', version: 'v1' }],
    ]);
    const fs: FileSystem = {
      ...overlay(files),
      isDirectory: (d) => path.resolve(d) === root,
      entries: (d) =>
        path.resolve(d) === root
          ? [
              { name: 'helper.py', kind: 'file' as const, link: false },
              { name: 'train.py', kind: 'file' as const, link: false },
            ]
          : [],
      realPath: (p) => path.resolve(p),
    };
    const project = new Project([root], await grammar(), fs);
    assert.equal(project.callersOf('wrap')[0]?.call.text, 'wrap(model)');
    // The editor opens train.py: its document has a version of its own (and here, an edit), with no invalidate.
    files.set(train, { text: 'from helper import wrap\n\nmodel = wrap(model)\n', version: 'document 1' });
    assert.equal(project.file(train)?.source.text.includes('model = wrap'), true);
    const callers = project.callersOf('wrap');
    assert.equal(callers.length, 1);
    assert.equal(callers[0]!.call.text, 'wrap(model)');
    assert.equal(callers[0]!.call.startPosition.row, 2);
    project.dispose();
  });
});
