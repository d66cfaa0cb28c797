'use strict';
// Hidden cases for ms: months in every spelling, the old units unchanged.
const assert = require('assert');
const ms = require(process.cwd());

const month = (365.25 * 24 * 60 * 60 * 1000) / 12;
assert.strictEqual(ms('3mo'), 3 * month);
assert.strictEqual(ms('1 MONTH'), month);
assert.strictEqual(ms('.5 months'), 0.5 * month);
assert.strictEqual(ms('-1mo'), -month);
assert.strictEqual(ms('5m'), 300000);
assert.strictEqual(ms('1w'), 604800000);
assert.strictEqual(ms('moo'), undefined);
console.log('ok');
