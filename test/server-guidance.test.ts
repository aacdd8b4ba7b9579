// teamDenialMessage: what a team session is told when it asks for another
// team, word for word for each kind of resource (a runner shows it to a
// person or an agent as it is).

import { describe, expect, it } from 'vitest';
import { teamDenialMessage } from '../src/server/access/guidance.js';

describe('teamDenialMessage', () => {
  it('knowledge: load, and the document shared into the pack', () => {
    expect(teamDenialMessage('payments', 'team_search')).toBe(
      'this session belongs to team "payments" and cannot load team "search": ' +
        "team sessions load only their own team's knowledge and the account's, with no exceptions for any role. " +
        'To use it: ask an admin to share the document into team "payments"\'s pack or the account pack; ' +
        'or work from a personal session of someone who is a member of team "search"; ' +
        'or hand the incident to team "search".',
    );
    expect(teamDenialMessage('payments', 'team_search', 'knowledge')).toBe(teamDenialMessage('payments', 'team_search'));
  });

  it('skills, MCP tools and sub-agents: use, and what an admin gives', () => {
    expect(teamDenialMessage('payments', 'team_search', 'skill')).toBe(
      'this session belongs to team "payments" and cannot use team "search"\'s skills: ' +
        "team sessions use only their own team's skills and the account's, with no exceptions for any role. " +
        'To use it: ask an admin to give the skill to team "payments" or to the account; ' +
        'or work from a personal session of someone who is a member of team "search"; ' +
        'or hand the incident to team "search".',
    );
    expect(teamDenialMessage('payments', 'team_search', 'tool')).toMatch(/^this session belongs to team "payments" and cannot use team "search"'s MCP tools: team sessions use only their own team's MCP tools and the account's, .* ask an admin to give the tool to team "payments" or to the account; /);
    expect(teamDenialMessage('payments', 'team_search', 'agent')).toMatch(/^this session belongs to team "payments" and cannot use team "search"'s sub-agents: team sessions use only their own team's sub-agents and the account's, .* ask an admin to give the sub-agent to team "payments" or to the account; /);
  });

  it('a name that is no scope at all is named as it is', () => {
    expect(teamDenialMessage('payments', 'no such thing')).toMatch(/^this session belongs to team "payments" and cannot load team "no such thing": /);
  });

  it('names a scope that is not a team as it is, and a session without a team as (none)', () => {
    expect(teamDenialMessage(undefined, 'account')).toMatch(/^this session belongs to team "\(none\)" and cannot load team "account": .*share the document into team "\(none\)"'s pack .*member of team "account"; or hand the incident to team "account"\.$/);
  });
});
