// This release's version, from package.json (one level above dist/, as the
// built CLI and its bundle both sit two levels below the package).

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const RELEASE = (require('../../package.json') as { version: string }).version;
