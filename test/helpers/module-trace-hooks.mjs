// Loader hooks for module-trace.mjs (they run on the loader thread).
import { appendFileSync } from 'node:fs';

export async function load(url, context, nextLoad) {
  appendFileSync(process.env.KNOWLEDGEFS_TEST_MODULE_TRACE, `${url}\n`);
  return nextLoad(url, context);
}
