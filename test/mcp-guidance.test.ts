// The MCP server's instructions as bytes: they are part of a cached prompt
// prefix in many harnesses, so a change to them is a change to every agent's
// prompt and shows up here as a change to a golden file, reviewed as one.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NAMES, guidanceText } from '../src/mcp/guidance.js';

const golden = (name: string) => readFileSync(new URL(`golden/${name}`, import.meta.url), 'utf8');

describe('guidanceText', () => {
  it('is these bytes exactly, without and with the fs tools', () => {
    expect(guidanceText(false)).toBe(golden('mcp-guidance.txt'));
    expect(guidanceText(true)).toBe(golden('mcp-guidance-fs-tools.txt'));
  });

  it('stays under the 2 KB at which clients often cut instructions, and names every tool, resource and prompt it offers', () => {
    for (const fsTools of [false, true]) {
      const text = guidanceText(fsTools);
      expect(Buffer.byteLength(text)).toBeLessThan(2048);
      for (const name of [NAMES.readTool, NAMES.manifestResource, NAMES.manifestPrompt]) expect(text).toContain(name);
      expect(text.includes(NAMES.listTool)).toBe(fsTools);
      expect(text.includes(NAMES.searchTool)).toBe(fsTools);
    }
  });

  it('names the tools as the server registers them', () => {
    expect(NAMES).toEqual({
      readTool: 'read_knowledge',
      listTool: 'list_knowledge',
      searchTool: 'search_knowledge',
      manifestResource: 'knowledgefs://manifest',
      manifestPrompt: 'knowledge_manifest',
    });
  });
});
