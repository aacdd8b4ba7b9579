#!/usr/bin/env node
// Thin entry: everything lives in dist/cli/main.js so it can be tested in-process.
import { main } from '../dist/cli/main.js';

main(process.argv).then(
  (code) => { process.exitCode = code; },
  (err) => {
    process.stderr.write(`knowledgefs: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
