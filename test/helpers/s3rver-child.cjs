// A real S3-protocol server (s3rver) in its own process, for tests:
//   node --openssl-legacy-provider s3rver-child.cjs DIR PORT BUCKET...
// Prints `listening <port>` once ready. s3rver's ListObjectsV2 continuation
// tokens use a cipher that OpenSSL 3 keeps in its legacy provider, hence the flag.
'use strict';
const S3rver = require('s3rver');

const [dir, port, ...buckets] = process.argv.slice(2);
const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory: dir,
  silent: true,
  configureBuckets: buckets.map((name) => ({ name })),
});
server.run().then(
  (address) => process.stdout.write(`listening ${address.port}\n`),
  (err) => {
    process.stderr.write(`s3rver failed to start: ${err && err.stack ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
// A plain close waits for keep-alive connections (~1.5 s): tests want it gone now.
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
