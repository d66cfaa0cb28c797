'use strict';

const test = require('node:test');
const assert = require('node:assert');
const cookie = require('..');

test('parse reads a Cookie header', () => {
  assert.deepStrictEqual(cookie.parse('foo=bar; equation=E%3Dmc%5E2'), {
    foo: 'bar',
    equation: 'E=mc^2'
  });
});

test('serialize writes a Set-Cookie header', () => {
  assert.strictEqual(
    cookie.serialize('id', 'a b', { path: '/', httpOnly: true, maxAge: 60 }),
    'id=a%20b; Max-Age=60; Path=/; HttpOnly'
  );
});
