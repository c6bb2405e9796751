// Unit tests of src/checkpoint-folders.ts (compiled to lib/ by `tsc`): `npm test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CheckpointFolders } from '../lib/checkpoint-folders.js';

/** A contents manager over `tree` (folder path -> its entries: a name ending in "/" is a
 * folder), recording the folders it lists. */
function contents(tree) {
  const listed = [];
  const manager = {
    listed,
    async get(path, options) {
      assert.deepEqual(options, { type: 'directory', content: true });
      listed.push(path);
      const names = tree[path];
      if (!names) {
        throw new Error(`no folder ${path}`);
      }
      const content = names.map(name => {
        const folder = name.endsWith('/');
        const base = folder ? name.slice(0, -1) : name;
        return { name: base, path: path ? `${path}/${base}` : base,
          type: folder ? 'directory' : 'file', last_modified: '' };
      });
      return { name: path, path, type: 'directory', content, last_modified: `m:${path}` };
    }
  };
  return manager;
}

test('a folder holding meta.json is a checkpoint, listed once', async () => {
  const manager = contents({ ckpt: ['meta.json', 'obs.memmap', 'sub/'] });
  const folders = new CheckpointFolders(manager);
  assert.equal(folders.isCheckpoint('ckpt'), undefined);
  assert.equal(await folders.check('ckpt'), 'checkpoint');
  assert.equal(folders.isCheckpoint('ckpt'), true);
  assert.equal(folders.opens('ckpt'), true);
  assert.deepEqual(manager.listed, ['ckpt']); // its sub-folders are its own: not looked into
});

test('a folder of checkpoints opens too: a run, a replay buffer, a torchrl.checkpoint', async () => {
  const manager = contents({
    run: ['config.json', 'step_1000/', 'step_2000.tdz'],
    rb: ['prefetch.pkl', 'storage/', 'writer/'],
    'rb/storage': ['meta.json', 'storage_metadata.json'],
    'rb/writer': ['metadata.json'],
    tc: ['components/', 'manifest.json'],
    'tc/components': ['0000-policy/'],
    'tc/components/0000-policy': ['component.json', 'state/'],
    'tc/components/0000-policy/state': ['meta.json', 'weight.memmap']
  });
  const folders = new CheckpointFolders(manager);
  for (const path of ['run', 'rb', 'tc']) {
    assert.equal(await folders.check(path), 'collection', path);
    assert.equal(folders.isCheckpoint(path), false, path); // not itself one
    assert.equal(folders.opens(path), true, path);
  }
  // the .tdz shows in the run's own listing: no sub-folder is listed
  assert.deepEqual(manager.listed, ['run', 'rb', 'rb/storage', 'tc', 'tc/components',
    'tc/components/0000-policy', 'tc/components/0000-policy/state']);
});

test('a folder holding no checkpoint is not offered, and the probe is bounded', async () => {
  const wide = { home: [...Array.from({ length: 20 }, (_, i) => `d${i}/`), '.cache/'] };
  for (let i = 0; i < 20; i++) {
    wide[`home/d${i}`] = i === 15 ? ['meta.json'] : ['notes.txt'];
  }
  wide['home/.cache'] = ['x.tdz'];
  const manager = contents({
    ...wide,
    deep: ['a/'], 'deep/a': ['b/'], 'deep/a/b': ['c/'], 'deep/a/b/c': ['d/'],
    'deep/a/b/c/d': ['meta.json'],
    hidden: ['.old.tdz', 'readme.md'],
    gone: undefined
  });
  const folders = new CheckpointFolders(manager);
  assert.equal(await folders.check('home'), 'none');
  assert.equal(folders.opens('home'), false);
  // the folder and at most eight sub-folders, hidden ones skipped
  assert.deepEqual(manager.listed, ['home', ...Array.from({ length: 8 }, (_, i) => `home/d${i}`)]);
  assert.equal(await folders.check('deep'), 'none'); // four levels down: left to the widget
  assert.equal(await folders.check('hidden'), 'none');
  assert.equal(await folders.check('gone'), 'none');
  assert.equal(folders.opens('gone'), false);
});

test('scan checks each listed folder once per modification time', async () => {
  const manager = contents({ run: ['step_1.tdz'], ckpt: ['meta.json'] });
  const folders = new CheckpointFolders(manager);
  const items = [
    { name: 'run', path: 'run', type: 'directory', last_modified: 't1' },
    { name: 'ckpt', path: 'ckpt', type: 'directory', last_modified: 't1' },
    { name: 'x.tdz', path: 'x.tdz', type: 'file', last_modified: 't1' }
  ];
  folders.scan(items);
  folders.scan(items); // pending: not queued again
  await new Promise(resolve => setTimeout(resolve, 10));
  assert.equal(folders.kindOf('run'), 'collection');
  assert.equal(folders.kindOf('ckpt'), 'checkpoint');
  assert.equal(folders.kindOf('x.tdz'), undefined);
  assert.deepEqual([...manager.listed].sort(), ['ckpt', 'run']);
});

test('a zarr store (td.to_zarr) is a checkpoint; a folder of one file is not', async () => {
  const manager = contents({
    'episodes.zarr': ['zarr.json', 'obs/', 'nested/'],
    data: ['zarr.txt', 'notes/'],
    'data/notes': ['readme.md']
  });
  const folders = new CheckpointFolders(manager);
  assert.equal(await folders.check('episodes.zarr'), 'checkpoint');
  assert.equal(folders.opens('episodes.zarr'), true);
  assert.equal(await folders.check('data'), 'none');
  assert.deepEqual(manager.listed, ['episodes.zarr', 'data', 'data/notes']);
});
