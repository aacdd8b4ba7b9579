// The MCP server's `instructions`: fixed when the client connects, often cut
// at about 2 KB, and part of a cached prompt prefix in many harnesses. So it
// is short, names no team, no date and no path beyond the layout, and is
// byte-identical for the same flags on every start.

/** Tool, resource and prompt names, in one place so the guidance cannot drift from what is registered. */
export const NAMES = {
  readTool: 'read_knowledge',
  listTool: 'list_knowledge',
  searchTool: 'search_knowledge',
  manifestResource: 'knowledgefs://manifest',
  manifestPrompt: 'knowledge_manifest',
} as const;

export function guidanceText(fsTools: boolean): string {
  const browse = fsTools
    ? `Browse it with ${NAMES.listTool} (like ls) and ${NAMES.searchTool} (like grep -rn), or with ls, grep -r, find and cat if you have a shell.`
    : 'Browse it with ls, grep -r, find and cat.';
  return [
    'Team knowledge (runbooks, architecture notes, postmortems) is in the knowledge/ directory: knowledge/account/ is shared by everyone, knowledge/team_<id>/ belongs to one team, and each starts at its DUTY.md.',
    browse,
    `Read a file with ${NAMES.readTool}, giving its path as ls prints it (knowledge/...). It checks access afresh on every call, and it is the only way to bring in a team that is not on disk yet: a successful read mounts that team, and from then on it can be browsed too.`,
    `Long files come in pages: the result says which offset to pass to continue.`,
    `The manifest (resource ${NAMES.manifestResource}, prompt ${NAMES.manifestPrompt}) holds the DUTY.md of every scope this session has.`,
    'A tool result may end with a <knowledgefs-reminder> block naming files you read that changed or were removed since: read them again before relying on them.',
    '',
  ].join('\n');
}
