import test from 'node:test';
import assert from 'node:assert/strict';
import { toCelsius } from './temperature.mjs';

test('water freezes at 0 C', () => {
  assert.equal(toCelsius(32), 0);
});

test('water boils at 100 C', () => {
  assert.equal(toCelsius(212), 100);
});
