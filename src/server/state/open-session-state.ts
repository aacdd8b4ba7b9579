// Picks the session state from the options: PostgreSQL when a state URL is
// given (`--state postgres://…` or $KNOWLEDGEFS_STATE_URL), else the local
// state file of the embedded mode. The only place that knows both exist.

import type { ResolvedOptions } from '../options.js';
import { PgSessionState } from './postgres/pg-session-state.js';
import { SessionRegistry, type PersistedState, type StateChange } from './file/session-registry.js';
import type { SessionState } from './session-state.js';
import { fileStateStore, type StateStore } from './file/state-file.js';

export async function openSessionState(
  options: ResolvedOptions,
  fileStore?: StateStore<PersistedState, StateChange>,
  onRoundTrip?: () => void,
): Promise<SessionState> {
  if (options.stateUrl !== undefined) {
    return PgSessionState.open({ url: options.stateUrl, heartbeatMs: options.stateHeartbeatMs, migrateContract: options.migrateContract, log: options.log, now: options.now, ...(onRoundTrip ? { onRoundTrip } : {}) });
  }
  return SessionRegistry.open(fileStore ?? fileStateStore<PersistedState, StateChange>(options.stateFile), options.stateFile);
}
