// Unit tests of src/paths.ts (compiled to lib/ by `tsc`): `npm test`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import {
  baseName,
  cellCode,
  consoleCode,
  parentDir,
  pythonString,
  relativeTo,
  rootRelative,
  viewVariable
} from '../lib/paths.js';

test('rootRelative normalizes paths inside the root', () => {
  assert.equal(rootRelative('demo_ckpt.tdz'), 'demo_ckpt.tdz');
  assert.equal(rootRelative('/runs//a/./ckpt/'), 'runs/a/ckpt');
  assert.equal(rootRelative('odd\\name.tdz'), 'odd\\name.tdz'); // a POSIX file name
  assert.equal(rootRelative('a..b/c...tdz'), 'a..b/c...tdz');
});

test('rootRelative refuses paths that could leave the root', () => {
  for (const bad of ['..', '../x.tdz', 'a/../../x', 'a/..\\..\\x', '..\\x', 'C:/x.tdz',
    'c:x', '\\\\server\\share\\x', 'a\0b', '', '/', './.']) {
    assert.throws(() => rootRelative(bad), /tdview: refusing/, JSON.stringify(bad));
  }
});

test('parentDir and baseName', () => {
  assert.equal(parentDir('a/b/c.tdz'), 'a/b');
  assert.equal(parentDir('c.tdz'), '');
  assert.equal(baseName('a/b/ckpt'), 'ckpt');
});

test('relativeTo: from a notebook directory to a checkpoint, within the root', () => {
  assert.equal(relativeTo('', 'demo_ckpt.tdz'), 'demo_ckpt.tdz');
  assert.equal(relativeTo('sub', 'demo_ckpt.tdz'), '../demo_ckpt.tdz');
  assert.equal(relativeTo('a/b', 'a/c/x.tdz'), '../c/x.tdz');
  assert.equal(relativeTo('a', 'a/x'), 'x');
  assert.equal(relativeTo('a/x', 'a/x'), '.');
  assert.throws(() => relativeTo('..', 'x.tdz'), /tdview: refusing/);
  assert.throws(() => relativeTo('', '../x.tdz'), /tdview: refusing/);
});

test('pythonString quotes with JSON escaping, line separators included', () => {
  assert.equal(pythonString('a"b\\c'), '"a\\"b\\\\c"');
  assert.equal(pythonString('x\ny\u0000'), '"x\\ny\\u0000"');
  assert.equal(pythonString('a\u2028b\u2029'), '"a\\u2028b\\u2029"');
  assert.equal(pythonString('données'), '"données"');
});

test('generated code', () => {
  assert.equal(consoleCode('a/"b".tdz'),
    'from tdview import TDView\nview = TDView("a/\\"b\\".tdz")\nview');
  assert.equal(cellCode('../x.tdz'), 'from tdview import TDView\nTDView("../x.tdz")');
});

test('Python reads each quoted path back unchanged', t => {
  const names = ['plain.tdz', 'a"b\'c.tdz', 'back\\slash', 'new\nline\ttab\r', 'nul\u0000',
    'del\u007f', '\u2028\u2029', 'é中😀', '\ud800lone', '\'\'\'"""', '{x}', '\\N{BULLET}'];
  const python = process.env.PYTHON || 'python3';
  const pairs = JSON.stringify(names.map(name => [pythonString(name), name]));
  const script = 'import ast, json, sys\n' +
    'pairs = json.loads(sys.stdin.read())\n' +
    'print(json.dumps([ast.literal_eval(lit) == name for lit, name in pairs]))';
  const done = spawnSync(python, ['-c', script], { input: pairs, encoding: 'utf8' });
  if (done.error) {
    t.skip(`${python} not found`);
    return;
  }
  assert.equal(done.status, 0, done.stderr);
  assert.deepEqual(JSON.parse(done.stdout), names.map(() => true));
});

test('viewVariable: view, then view2, view3 … for views sharing a kernel', () => {
  assert.equal(viewVariable([]), 'view');
  assert.equal(viewVariable(['view']), 'view2');
  assert.equal(viewVariable(['view', 'view2']), 'view3');
  assert.equal(viewVariable(['view2']), 'view'); // a closed console's name comes free
  assert.equal(consoleCode('a.tdz', 'view2'), 'from tdview import TDView\nview2 = TDView("a.tdz")\nview2');
});
