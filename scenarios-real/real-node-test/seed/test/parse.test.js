'use strict';

const test = require('node:test');
const assert = require('node:assert');
const ms = require('..');

test('parses plain numbers as milliseconds', () => {
  assert.strictEqual(ms('100'), 100);
});

test('parses units', () => {
  assert.strictEqual(ms('1s'), 1000);
  assert.strictEqual(ms('2 days'), 2 * 24 * 60 * 60 * 1000);
  assert.strictEqual(ms('1.5h'), 5400000);
  assert.strictEqual(ms('1y'), 31557600000);
});

test('returns undefined for what it cannot parse', () => {
  assert.strictEqual(ms('☃'), undefined);
  assert.strictEqual(ms('10-.5'), undefined);
});

test('formats numbers', () => {
  assert.strictEqual(ms(60000), '1m');
  assert.strictEqual(ms(60000, { long: true }), '1 minute');
});
