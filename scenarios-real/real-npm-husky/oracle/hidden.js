'use strict';
// Hidden cases for bytes.parse: IEC units, and the old units unchanged.
const assert = require('assert');
const bytes = require(process.cwd());

assert.strictEqual(bytes.parse('3KiB'), 3072);
assert.strictEqual(bytes.parse('0.5 mib'), 524288);
assert.strictEqual(bytes.parse('4GIB'), 4 * 1024 ** 3);
assert.strictEqual(bytes.parse('1 TiB'), 1024 ** 4);
assert.strictEqual(bytes.parse('2PiB'), 2 * 1024 ** 5);
assert.strictEqual(bytes.parse('1KB'), 1024);
assert.strictEqual(bytes.parse('10 mb'), 10 * 1024 ** 2);
assert.strictEqual(bytes.parse('nonsense'), null);
assert.strictEqual(bytes(1536), '1.5KB');
console.log('ok');
