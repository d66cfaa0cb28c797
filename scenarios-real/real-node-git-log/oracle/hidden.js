'use strict';
// Hidden cases: the result tree is made a repository of its own (the oracle's copy has no .git),
// tagged, then moved on by two commits; getLastCommit's describe must follow git's.
const assert = require('assert');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const dir = process.cwd();
const git = (...args) => execFileSync('git', ['-c', 'user.name=Oracle', '-c', 'user.email=oracle@example.com', ...args], { cwd: dir, encoding: 'utf8' }).trim();
const { getLastCommit } = require(path.join(dir, 'source', 'index.js'));
const last = () => new Promise((resolve, reject) => getLastCommit((e, c) => (e ? reject(new Error(String(e))) : resolve(c)), { dst: dir }));

(async () => {
  git('init', '-q');
  git('add', '-A');
  git('commit', '-q', '-m', 'import');
  let c = await last();
  assert.strictEqual(c.describe, git('rev-parse', '--short', 'HEAD'));
  git('tag', '-a', 'release-2', '-m', 'release 2');
  fs.writeFileSync(path.join(dir, 'oracle-1.txt'), '1\n');
  git('add', 'oracle-1.txt');
  git('commit', '-q', '-m', 'one');
  fs.writeFileSync(path.join(dir, 'oracle-2.txt'), '2\n');
  git('add', 'oracle-2.txt');
  git('commit', '-q', '-m', 'two');
  c = await last();
  assert.strictEqual(c.describe, 'release-2-2-g' + git('rev-parse', '--short', 'HEAD'));
  assert.strictEqual(c.subject, 'two');
  assert.strictEqual(c.hash, git('log', '-1', '--pretty=format:%H'));
  console.log('ok');
})().catch((e) => { console.error(e); process.exit(1); });
