// Turning the client library's answers into MCP tool results, as plain data
// (no SDK objects), so the wording is tested without a transport.
//
// - The first text block of a read is the file's content, exactly; what the
//   agent should know besides (a cut, a mount) follows in blocks of its own,
//   and sha256, size and paging facts go in `_meta` for the harness.
// - Errors are results with `isError: true`, never protocol errors, so the
//   agent sees them. A not_found carries the daemon's message untouched: a
//   personal session's hidden denial stays byte-identical to a missing file.
// - The reminder rides along, delimited, only when it names changed or
//   removed files.

import { isKnowledgeError, isTemporary } from '../client/errors.js';
import { errorCodeOf } from '../core/errors.js';
import type { ReadResult, Reminder } from '../client/knowledge-client.js';
import { NAMES } from './guidance.js';

export interface TextBlock {
  readonly type: 'text';
  readonly text: string;
}

export interface ToolResult {
  [key: string]: unknown;
  readonly content: TextBlock[];
  readonly isError?: boolean;
  readonly _meta?: Record<string, unknown>;
}

const text = (t: string): TextBlock => ({ type: 'text', text: t });

/** `team_search` for `knowledge/team_search/runbooks/x.md`. */
function scopeOf(displayPath: string): string {
  return displayPath.split('/')[1] ?? displayPath;
}

export function readToolResult(res: ReadResult): ToolResult {
  const content = [text(res.content)];
  if (res.truncated) {
    content.push(text(`[cut at character ${res.nextOffset ?? res.totalChars} of ${res.totalChars}: call ${NAMES.readTool} again with path=${JSON.stringify(res.path)} and offset=${res.nextOffset ?? res.totalChars} to continue]`));
  }
  if (res.mounted) {
    const scope = scopeOf(res.path);
    content.push(text(`[${scope} is now mounted: ls, grep -r and find see ${res.path.split('/')[0]}/${scope}/ from now on]`));
  }
  return {
    content,
    _meta: {
      path: res.path,
      sha256: res.sha256,
      size: res.size,
      offset: res.offset,
      totalChars: res.totalChars,
      truncated: res.truncated,
      nextOffset: res.nextOffset,
      mounted: res.mounted,
    },
  };
}

/** The text an agent sees for a failure; `log` hears about anything that is not ours. */
export function errorText(err: unknown, log: (line: string) => void): string {
  if (!isKnowledgeError(err)) {
    log(`internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return 'internal error in knowledgefs mcp (see its log)';
  }
  if (isTemporary(err)) return `temporary: ${err.message}. Try again shortly.`;
  if (err.code === 'not_found' || err.code === 'denied' || err.code === 'invalid_argument') return err.message;
  return `${err.code}: ${err.message}`;
}

export function errorToolResult(err: unknown, log: (line: string) => void): ToolResult {
  return { content: [text(errorText(err, log))], isError: true, _meta: { code: errorCodeOf(err) } };
}

/** The delimited reminder block, or undefined when nothing changed or went away. */
export function reminderBlock(reminder: Reminder): TextBlock | undefined {
  if (reminder.changed.length === 0 && reminder.deleted.length === 0) return undefined;
  return text(`<knowledgefs-reminder>\n${reminder.text.endsWith('\n') ? reminder.text : `${reminder.text}\n`}</knowledgefs-reminder>`);
}
