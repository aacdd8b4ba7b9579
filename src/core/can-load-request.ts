// The can-load request, checked the same way by the daemon's socket (before
// anything leaves the runner) and by the control plane: scope names as on
// the mount, a resource kind, and a bounded list.

import { KnowledgeError } from './errors.js';
import { parseScope } from './scope.js';
import { CAN_LOAD_MAX_SCOPES, RESOURCE_KINDS, type CanLoadRequest, type ResourceKind } from './wire.js';

export const CAN_LOAD_EXAMPLE = '{"scopes": ["account", "team_payments"], "for": "skill"}';

/** The scope names (`account`, `team_<id>`) and the resource kind, or a clear invalid_argument. */
export function parseCanLoadRequest(body: unknown): CanLoadRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new KnowledgeError('invalid_argument', `request body must be JSON like ${CAN_LOAD_EXAMPLE}`);
  const { scopes, for: kind } = body as Record<string, unknown>;
  if (typeof kind !== 'string' || !(RESOURCE_KINDS as readonly string[]).includes(kind)) {
    throw new KnowledgeError('invalid_argument', `"for" must be one of ${RESOURCE_KINDS.join(', ')}${typeof kind === 'string' ? `, not "${kind.slice(0, 40)}"` : ''}`);
  }
  if (!Array.isArray(scopes) || scopes.length === 0) throw new KnowledgeError('invalid_argument', `"scopes" must be a non-empty list, like ${CAN_LOAD_EXAMPLE}`);
  if (scopes.length > CAN_LOAD_MAX_SCOPES) throw new KnowledgeError('invalid_argument', `at most ${CAN_LOAD_MAX_SCOPES} scopes per request, got ${scopes.length}`);
  for (const scope of scopes) {
    if (typeof scope !== 'string' || parseScope(scope) === null) {
      const shown = typeof scope === 'string' ? `"${scope.slice(0, 80)}"` : JSON.stringify(scope);
      throw new KnowledgeError('invalid_argument', `${shown} is not a scope name: the account is "account", a team "team_<id>" (as on the mount)`);
    }
  }
  return { scopes: scopes as string[], for: kind as ResourceKind };
}
