'use strict';
// Hidden cases for bytes.format of numeric strings, and is-number a locked runtime dependency.
const assert = require('assert');
const path = require('path');
const pkg = require(path.join(process.cwd(), 'package.json'));
const lock = require(path.join(process.cwd(), 'package-lock.json'));
const bytes = require(process.cwd());

assert.ok(pkg.dependencies && pkg.dependencies['is-number'], 'is-number is a runtime dependency');
assert.strictEqual(lock.packages['node_modules/is-number'].version, '7.0.0');
assert.strictEqual(bytes.format('2048'), '2KB');
assert.strictEqual(bytes.format('  512  '), '512B');
assert.strictEqual(bytes.format('1e3'), '1000B');
assert.strictEqual(bytes.format('twelve'), null);
assert.strictEqual(bytes.format(1536), '1.5KB');
assert.strictEqual(bytes.parse('1KB'), 1024);
console.log('ok');
