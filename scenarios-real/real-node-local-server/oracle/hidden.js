'use strict';
// Hidden round trip: a server on 127.0.0.1 sets cookies, parseSetCookie reads them back.
const assert = require('assert');
const http = require('http');
const cookie = require(process.cwd());

const expires = new Date(Date.UTC(2031, 5, 6, 7, 8, 9));
const server = http.createServer((req, res) => {
  res.setHeader('Set-Cookie', [
    cookie.serialize('q', 'x;y', { sameSite: 'lax', partitioned: true, secure: true, path: '/' }),
    cookie.serialize('t', 'v', { maxAge: 0, expires }),
    'raw=%E2%9C%93; Unknown=1; priority=Low',
    'noequals; Path=/'
  ]);
  res.end();
});
server.listen(0, '127.0.0.1', () => {
  http.get({ host: '127.0.0.1', port: server.address().port, agent: false }, (res) => {
    res.resume();
    res.on('end', () => {
      const got = res.headers['set-cookie'].map(cookie.parseSetCookie);
      server.closeAllConnections();
      server.close();
      assert.deepStrictEqual(got[0], {
        name: 'q', value: 'x;y', path: '/', secure: true, partitioned: true, sameSite: 'lax'
      });
      assert.deepStrictEqual(got[1], { name: 't', value: 'v', maxAge: 0, expires });
      assert.deepStrictEqual(got[2], { name: 'raw', value: '\u2713', priority: 'low' });
      assert.strictEqual(got[3], undefined);
      assert.deepStrictEqual(cookie.parse('a=1; b=2'), { a: '1', b: '2' });
      console.log('ok');
    });
  });
});
