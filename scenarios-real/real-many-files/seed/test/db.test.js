'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..', 'db');

test('every entry of the tree is a JSON object with a source', () => {
  let count = 0;
  for (const type of fs.readdirSync(root)) {
    for (const file of fs.readdirSync(path.join(root, type))) {
      const entry = JSON.parse(fs.readFileSync(path.join(root, type, file), 'utf8'));
      assert.strictEqual(typeof entry, 'object', `${type}/${file}`);
      assert.ok(['apache', 'iana', 'nginx'].includes(entry.source) || entry.source === undefined, `${type}/${file}`);
      count++;
    }
  }
  assert.strictEqual(count, 2279);
});
