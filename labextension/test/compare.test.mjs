// Unit tests of src/compare.ts (compiled to lib/ by `tsc`): when "Compare in tdview"
// applies, and the code it runs. `npm test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  compareConsoleCode,
  compareSessionName,
  compareTargets,
  comparisonOfSession
} from '../lib/compare.js';

/** A file-browser item: a name, and whether tdview opens it. */
const item = (path, checkpoint = true) => ({ path, checkpoint });
const checkpointOf = it => (it.checkpoint ? it.path : null);

test('Compare applies to exactly two checkpoints', () => {
  assert.equal(compareTargets([], checkpointOf), null);
  assert.equal(compareTargets([item('a.tdz')], checkpointOf), null);
  assert.deepEqual(compareTargets([item('a.tdz'), item('b')], checkpointOf), ['a.tdz', 'b']);
  assert.equal(compareTargets([item('a.tdz'), item('notes.txt', false)], checkpointOf), null);
  assert.equal(compareTargets([item('a.tdz'), item('b.tdz'), item('c.tdz')], checkpointOf), null);
  assert.equal(compareTargets([item('a.tdz'), item('a.tdz')], checkpointOf), null);
});

test('the older side is the one whose name sorts first, numbers by value', () => {
  const pair = (x, y) => compareTargets([item(x), item(y)], checkpointOf);
  assert.deepEqual(pair('run/step_1000', 'run/step_999'), ['run/step_999', 'run/step_1000']);
  assert.deepEqual(pair('ckpt_b.tdz', 'ckpt_a.tdz'), ['ckpt_a.tdz', 'ckpt_b.tdz']);
  assert.deepEqual(pair('x/ckpt', 'a/ckpt'), ['a/ckpt', 'x/ckpt']); // same name: by path
});

test('the console compares them with TDView(a, compare=b), as Python literals', () => {
  assert.equal(
    compareConsoleCode('runs/step_1', 'runs/step_2.tdz'),
    'from tdview import TDView\nview = TDView("runs/step_1", compare="runs/step_2.tdz")\nview'
  );
  assert.match(compareConsoleCode('a"b', 'c\u2028'), /TDView\("a\\"b", compare="c\\u2028"\)/);
});

test('a compare console is restored from its session name, and only it', () => {
  const name = compareSessionName('runs//step_1', 'runs/step_2.tdz');
  assert.equal(name, 'tdview compare: runs/step_1 ⇄ runs/step_2.tdz');
  assert.deepEqual(comparisonOfSession(name), ['runs/step_1', 'runs/step_2.tdz']);
  assert.ok(!name.startsWith('tdview: ')); // never read as one checkpoint's console
  assert.equal(comparisonOfSession('tdview: runs/step_1'), null);
  assert.equal(comparisonOfSession('tdview compare: ../x ⇄ y'), null);
  assert.equal(comparisonOfSession('tdview compare: only-one'), null);
  assert.throws(() => compareSessionName('../up', 'b'), /tdview: refusing/);
});
