// POST /v1/can-load: may this session use a resource of these scopes? The
// same CanLoadScope that decides knowledge decides a harness's skills, a
// team's MCP tools and sub-agents, so no harness writes the rule again.
//
// One decider for the whole request: several scopes cost one membership
// lookup. Each decision is audited with the resource kind as its action. A
// refusal has the read tool's shape: a personal session's is word for word
// what a scope that does not exist gets (nothing confirms a team exists), a
// team session's is guidance, a membership failure fails closed. Nothing is
// mounted and nothing enters the read set: asking is not loading.

import { CAN_LOAD_EXAMPLE, parseCanLoadRequest } from '../../core/can-load-request.js';
import { KnowledgeError } from '../../core/errors.js';
import type { CanLoadAnswer, CanLoadResponse } from '../../core/wire.js';
import { jsonResponse, type ApiRequest, type ApiResponse } from './api.js';
import { decider, denialOf, type RouteContext } from '../context.js';
import type { SessionRecord } from '../state/session-state.js';

// Stryker disable BlockStatement: with any block emptied the body parses to undefined, which parseCanLoadRequest refuses with this same message
function parseBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new KnowledgeError('invalid_argument', `request body must be JSON like ${CAN_LOAD_EXAMPLE}`);
  }
}
// Stryker restore BlockStatement

/** The missing-scope message; a personal session's refusal is this, byte for byte. */
export function noSuchScopeMessage(scope: string): string {
  return `no such scope: ${scope}`;
}

export async function canLoadRoute(ctx: RouteContext, session: SessionRecord, req: ApiRequest): Promise<ApiResponse> {
  const request = parseCanLoadRequest(parseBody(req.body));
  const { decide } = decider(ctx, session);
  const answers: CanLoadAnswer[] = [];
  for (const scope of request.scopes) {
    const decision = await decide(scope, request.for);
    if (decision.allowed) {
      answers.push({ scope, allowed: true });
      continue;
    }
    const refusal = denialOf(session, decision, scope, request.for);
    answers.push({ scope, allowed: false, error: refusal.code === 'not_found' ? { code: 'not_found', message: noSuchScopeMessage(scope) } : refusal });
  }
  return jsonResponse(200, { for: request.for, answers } satisfies CanLoadResponse);
}
