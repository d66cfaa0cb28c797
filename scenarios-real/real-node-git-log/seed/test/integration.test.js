'use strict';

// The package's own integration test (test/integration.js, mocha and chai), on node:test: it
// reads the last commit of the repository this package sits in.
const test = require('node:test');
const assert = require('node:assert');
const git = require('../source/index.js');

test('getLastCommit parses git log of this repository', (t, done) => {
  git.getLastCommit((err, commit) => {
    assert.strictEqual(err, null);
    assert.ok(commit);
    assert.ok(commit.shortHash.length >= 7);
    assert.strictEqual(commit.hash.length, 40);
    assert.match(commit.subject, /.+/);
    assert.match(commit.authoredOn, /^\d{10}$/);
    assert.match(commit.committedOn, /^\d{10}$/);
    assert.match(commit.author.name, /.+/);
    assert.match(commit.committer.name, /.+/);
    assert.ok(Array.isArray(commit.tags));
    done();
  });
});
