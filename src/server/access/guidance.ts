// What a team session is told when it asks for another team: which team it
// belongs to, why it can't load the other, and what to do instead. Unlike a
// personal session's denial (which must look like a missing file), a team
// session learns nothing new from this: team sessions never load other teams.

import { parseScope, type ScopeName } from '../../core/scope.js';
import type { ResourceKind } from '../../core/wire.js';

/** How each kind of resource is named in the guidance, and what an admin would do to share one. */
const RESOURCE_WORDS: Record<ResourceKind, { what: string; share: (own: string) => string }> = {
  knowledge: { what: 'knowledge', share: (own) => `share the document into team "${own}"'s pack or the account pack` },
  skill: { what: 'skills', share: (own) => `give the skill to team "${own}" or to the account` },
  tool: { what: 'MCP tools', share: (own) => `give the tool to team "${own}" or to the account` },
  agent: { what: 'sub-agents', share: (own) => `give the sub-agent to team "${own}" or to the account` },
};

export function teamDenialMessage(sessionTeam: string | undefined, requested: ScopeName, kind: ResourceKind = 'knowledge'): string {
  const parsed = parseScope(requested);
  const wanted = parsed?.kind === 'team' ? parsed.teamId : requested;
  const own = sessionTeam ?? '(none)';
  const words = RESOURCE_WORDS[kind];
  const load = kind === 'knowledge' ? 'load' : 'use';
  return (
    `this session belongs to team "${own}" and cannot ${load} team "${wanted}"` + (kind === 'knowledge' ? ': ' : `'s ${words.what}: `) +
    `team sessions ${load} only their own team's ${words.what} and the account's, with no exceptions for any role. ` +
    `To use it: ask an admin to ${words.share(own)}; ` +
    `or work from a personal session of someone who is a member of team "${wanted}"; ` +
    `or hand the incident to team "${wanted}".`
  );
}
