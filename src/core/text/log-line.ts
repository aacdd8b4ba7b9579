// One log line, in the format the operator chose (`--log-format`):
//
//   text  the message as it has always been printed, one line;
//   json  one object a line: {"time", "level", "component", "message", ...fields},
//         the shape log collectors (Loki, Elasticsearch, CloudWatch) parse.
//
// Secrets are scrubbed from every line whatever its source: runner and admin
// tokens (`kfs_…`, `kfsadmin_…`), bearer credentials and passwords in URLs.
// Names from the data directory are escaped where they are logged
// (escape-for-log.ts); JSON encoding escapes what is left.

import { escapeForLog } from './escape-for-log.js';

export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export type LogLevel = 'info' | 'warn' | 'error';

/** Structured context of a line: `level` (default info) and plain values (`requestId`, `session`, …). */
export type LogFields = { readonly level?: LogLevel } & Readonly<Record<string, string | number | boolean | null | undefined>>;

/** How the parts log: a message, and optionally its level and fields. */
export type Log = (message: string, fields?: LogFields) => void;

export function parseLogFormat(text: string): LogFormat {
  if ((LOG_FORMATS as readonly string[]).includes(text)) return text as LogFormat;
  throw new Error(`expected text or json, not "${text}"`);
}

const SECRETS: readonly [RegExp, string][] = [
  [/\b(kfs_|kfsadmin_)[A-Za-z0-9_-]{8,}/g, '$1[redacted]'],
  [/\b(Bearer\s+)\S+/gi, '$1[redacted]'],
  [/(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]+@/gi, '$1[redacted]@'],
];

/** `text` with tokens, bearer credentials and URL passwords replaced by `[redacted]`. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of SECRETS) out = out.replace(pattern, replacement);
  return out;
}

export function formatLogLine(format: LogFormat, time: Date, component: string, message: string, fields: LogFields = {}): string {
  const { level = 'info', ...rest } = fields;
  // A message holding a line break (a stack trace) stays one line; names in it were escaped already.
  if (format === 'text') return `${redactSecrets(message).replace(/[\n\r\u0085\u2028\u2029]/g, escapeForLog)}\n`;
  const extra: Record<string, string | number | boolean | null> = {};
  for (const [key, value] of Object.entries(rest)) {
    if (value === undefined || key === 'time' || key === 'component' || key === 'message') continue;
    extra[key] = typeof value === 'string' ? redactSecrets(value) : value;
  }
  return `${JSON.stringify({ time: time.toISOString(), level, component, message: redactSecrets(message), ...extra })}\n`;
}
