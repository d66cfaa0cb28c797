import test from 'node:test';
import assert from 'node:assert/strict';
import { words } from '../text.mjs';

test('words keeps punctuation', () => {
  assert.deepEqual(words('hi, you'), ['hi,', 'you']);
});

test('words drops extra spaces', () => {
  assert.deepEqual(words('  a   b '), ['a', 'b']);
});
