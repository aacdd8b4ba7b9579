// A real S3-protocol server (s3rver) in its own process, for tests:
//   node --openssl-legacy-provider s3rver-child.cjs DIR PORT BUCKET...
// Prints `listening <port>` once ready. s3rver's ListObjectsV2 continuation
// tokens use a cipher that OpenSSL 3 keeps in its legacy provider, hence the flag.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const S3rver = require('s3rver');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

// S3 replaces an object atomically: a GET sees the old object or the new
// one, whole. s3rver truncates the object file in place and may write its
// new etag before the body is on disk, so a GET racing a PUT can get a cut
// body. Write the body to a temporary file and rename it into place, then
// the etag, so this test server keeps S3's promise.
FilesystemStore.prototype.putObject = async function putObjectAtomically(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
  const chunks = [];
  if (Buffer.isBuffer(object.content)) chunks.push(object.content);
  else for await (const chunk of object.content) chunks.push(Buffer.from(chunk));
  const body = Buffer.concat(chunks);
  const temporary = `${objectPath}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  await fs.promises.writeFile(temporary, body);
  await fs.promises.rename(temporary, objectPath);
  const md5 = crypto.createHash('md5').update(body).digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size: body.length, md5 };
};

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
