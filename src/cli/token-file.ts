// Reading a token from a file, shared by serve, session and mount. Its own
// module so `mount` and `session` do not load the control plane (and its
// dependencies) just to read a token.

import { readFile } from 'node:fs/promises';
import { KnowledgeError } from '../core/errors.js';

export const ADMIN_TOKEN_ENV = 'KNOWLEDGEFS_ADMIN_TOKEN';

export async function readTokenFile(file: string, what: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new KnowledgeError('config', `${what} ${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const token = text.trim();
  if (token === '') throw new KnowledgeError('config', `${what} ${file}: empty`);
  return token;
}
