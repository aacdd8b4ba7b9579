// `node --import ./module-trace.mjs`: appends the URL of every module the
// process loads (ESM and CommonJS alike, through the loader hooks) to the
// file named by $KNOWLEDGEFS_TEST_MODULE_TRACE. cli-modules.test.ts uses it
// to see what a command's module graph really holds.
import { register } from 'node:module';

if (process.env.KNOWLEDGEFS_TEST_MODULE_TRACE) register('./module-trace-hooks.mjs', import.meta.url);
