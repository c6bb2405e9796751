import assert from 'node:assert/strict';
import { test } from 'node:test';

import { notebookName } from '../lib/paths.js';

test('a notebook opened next to a checkpoint is named after it', () => {
  assert.equal(notebookName('demo_ckpt'), 'demo_ckpt-tdview.ipynb');
  assert.equal(notebookName('demo_ckpt.tdz'), 'demo_ckpt-tdview.ipynb');
  assert.equal(notebookName('run.TDZ', 2), 'run-tdview-2.ipynb');
  assert.equal(notebookName('.tdz'), 'checkpoint-tdview.ipynb');
  assert.equal(notebookName('model.safetensors'), 'model-tdview.ipynb');
  assert.equal(notebookName('episodes.h5'), 'episodes-tdview.ipynb');
  assert.equal(notebookName('episodes.HDF5'), 'episodes-tdview.ipynb');
  assert.equal(notebookName('episodes.zarr'), 'episodes-tdview.ipynb');
});
