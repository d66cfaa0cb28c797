const test = require('node:test');
const assert = require('node:assert');
const { shout } = require('../text.js');

test('shout', () => {
  assert.strictEqual(shout('hi'), 'HI');
});
