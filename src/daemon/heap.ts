// V8 heap tuning for the mount daemon's process.
//
// A plan is allocated all at once and nearly all of it survives (the tree
// keeps most of it), so V8 grows its young generation to the maximum, two
// 16 MiB semi-spaces, and keeps them: ~30 MiB of resident memory that only
// a start-up burst used (at 100 000 files, about a fifth of the daemon).
// Capping the growth keeps the young generation at its initial 1 MiB
// semi-spaces; objects that survive move to the old generation sooner, which
// costs no measurable time here. Unlike --max-semi-space-size, this flag can
// be set after Node has started, so the daemon sets it for itself; an
// operator's own semi-space flag (NODE_OPTIONS or node's command line) wins.

import { setFlagsFromString } from 'node:v8';

export const YOUNG_GENERATION_FLAG = '--semi-space-growth-factor=1';

/** Sets YOUNG_GENERATION_FLAG unless a semi-space flag was given; says whether it did. */
export function keepYoungGenerationSmall(execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  if ([...execArgv, nodeOptions ?? ''].some((arg) => arg.includes('semi-space') || arg.includes('semi_space'))) return false;
  setFlagsFromString(YOUNG_GENERATION_FLAG);
  return true;
}
