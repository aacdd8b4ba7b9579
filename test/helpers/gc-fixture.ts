// The data directory and publications the gc tests (in-process and CLI) start from.

import type { Pointer } from '../../src/core/publication.js';
import { publishTo } from './bucket.js';
import { writeDataFile, type DataDirSpec } from './data-dir.js';
import type { TestS3 } from './s3rver.js';

export const GC_SPEC: DataDirSpec = {
  teams: { payments: 'Payments' },
  users: { alice: { teams: ['payments'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/db.md': 'db v1\n',
  },
};

/** Three publications in `prefix`: db.md at v1, v2, v3. Returns their pointers, oldest first. */
export async function threePublications(s3: TestS3, prefix: string, data: string): Promise<Pointer[]> {
  const pointers: Pointer[] = [];
  for (const v of [1, 2, 3]) {
    await writeDataFile(data, 'teams/payments/db.md', `db v${v}\n`);
    pointers.push((await publishTo(s3, prefix, data)).pointer);
  }
  return pointers;
}
