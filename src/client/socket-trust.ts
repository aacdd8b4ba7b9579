// The client's side of the control-socket trust rule (src/core/local/socket-trust.ts):
// before `read`, `manifest` or `reminder` send anything, the socket and every
// directory above it must be owned by root, by the caller, or by the daemon's
// user when the operator named it (daemon-user.ts), and no other user may be
// able to replace the socket. Otherwise another local user could
// answer in the daemon's place, so the client refuses and says why.
//
// A missing socket is refused here too (as "no daemon"), without connecting:
// in a shared sticky directory like /tmp, a name that is free now could be
// taken by someone else between this check and the connect.

import { lstatSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { socketFileTrustProblem, type TrustedUids } from '../core/local/socket-trust.js';
import { directoryChainProblem } from '../disk/trusted-directory.js';

export type SocketTrust = { readonly ok: true } | { readonly ok: false; readonly missing: boolean; readonly problem: string };

function callerUid(): number {
  return process.getuid?.() ?? 0;
}

/** Whether the socket at `path` may be trusted by user `uid` (default: this process's), or by any of several. */
export function socketTrustProblem(path: string, uid: TrustedUids = callerUid()): SocketTrust {
  const absolute = resolve(path);
  let dirProblem: string | undefined;
  try {
    dirProblem = directoryChainProblem(dirname(absolute), uid);
  } catch (err) {
    return { ok: false, missing: true, problem: `${dirname(absolute)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
  }
  if (dirProblem !== undefined) return { ok: false, missing: false, problem: dirProblem };
  let st;
  try {
    st = lstatSync(absolute);
  } catch (err) {
    return { ok: false, missing: true, problem: `${absolute}: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
  }
  const problem = socketFileTrustProblem({ path: absolute, uid: st.uid, mode: st.mode }, uid);
  return problem === undefined ? { ok: true } : { ok: false, missing: false, problem };
}
