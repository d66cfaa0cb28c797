'use strict';

var assert = require('assert');
var bytes = require('..');

describe('bytes.parse', function () {
  it('returns numbers as they are', function () {
    assert.strictEqual(bytes.parse(1024), 1024);
  });

  it('parses units without regard to case', function () {
    assert.strictEqual(bytes.parse('1kb'), 1024);
    assert.strictEqual(bytes.parse('1KB'), 1024);
    assert.strictEqual(bytes.parse('2 MB'), 2 * 1024 * 1024);
  });

  it('parses fractions', function () {
    assert.strictEqual(bytes.parse('1.5kb'), 1536);
  });

  it('returns null for what is not a size', function () {
    assert.strictEqual(bytes.parse('foo'), null);
    assert.strictEqual(bytes.parse(undefined), null);
  });
});
