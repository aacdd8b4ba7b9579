// What a team session is told when it asks for another team: which team it
// belongs to, why it can't load the other, and what to do instead. Unlike a
// personal session's denial (which must look like a missing file), a team
// session learns nothing new from this: team sessions never load other teams.

import { parseScope, type ScopeName } from '../../core/scope.js';

export function teamDenialMessage(sessionTeam: string | undefined, requested: ScopeName): string {
  const parsed = parseScope(requested);
  const wanted = parsed?.kind === 'team' ? parsed.teamId : requested;
  const own = sessionTeam ?? '(none)';
  return (
    `this session belongs to team "${own}" and cannot load team "${wanted}": ` +
    `team sessions load only their own team's knowledge and the account's, with no exceptions for any role. ` +
    `To use it: ask an admin to share the document into team "${own}"'s pack or the account pack; ` +
    `or work from a personal session of someone who is a member of team "${wanted}"; ` +
    `or hand the incident to team "${wanted}".`
  );
}
