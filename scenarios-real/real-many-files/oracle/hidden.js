'use strict';
// Hidden lookups, expected values computed from mime-db 1.52.0's db.json; then a type added to
// the tree must be found (the code reads the tree, it does not carry a copy of the data).
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const { execFileSync, spawnSync } = require('child_process');
const dir = process.cwd();
const script = path.join(dir, 'lookup.js');

const expected = {
  json: ['application/json'],
  mp4: ['video/mp4'],
  wav: ['audio/wav', 'audio/wave', 'audio/x-wav'],
  mp3: ['audio/mp3', 'audio/mpeg'],
  woff2: ['font/woff2'],
  ts: ['video/mp2t'],
};
const { lookup } = require(script);
for (const [ext, types] of Object.entries(expected)) {
  assert.deepStrictEqual(lookup(ext), types, ext);
}
assert.deepStrictEqual(lookup('.MP3'), expected.mp3);
assert.deepStrictEqual(lookup('song.wav'), expected.wav);
assert.deepStrictEqual(lookup('qqqq'), []);
assert.strictEqual(execFileSync('node', [script, 'mp3'], { encoding: 'utf8' }), 'audio/mp3\naudio/mpeg\n');
assert.strictEqual(spawnSync('node', [script, 'qqqq']).status, 1);

fs.mkdirSync(path.join(dir, 'db', 'x-oracle'), { recursive: true });
fs.writeFileSync(path.join(dir, 'db', 'x-oracle', 'probe.json'), JSON.stringify({ source: 'iana', extensions: ['oracleprobe'] }));
assert.strictEqual(execFileSync('node', [script, 'oracleprobe'], { encoding: 'utf8' }), 'x-oracle/probe\n');
console.log('ok');
