#!/usr/bin/env node
// Thin entry: everything lives in dist/cli/main.js so it can be tested
// in-process; this loads it as bundled by scripts/bundle-cli.mjs (the same
// code in fewer files, which Node loads faster).
import { endQuietlyOnBrokenPipe } from '../dist/bundle/broken-pipe.js';
import { main } from '../dist/bundle/main.js';

endQuietlyOnBrokenPipe();

main(process.argv).then(
  (code) => {
    process.exitCode = code;
    // The command is done. A handle left holding the event loop (fuse-native's
    // loop after a mount was detached by someone else) must not keep the
    // process alive: exit shortly after, unless it ends by itself first.
    setTimeout(() => process.exit(), 500).unref();
  },
  (err) => {
    process.stderr.write(`knowledgefs: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
