// Names from the data directory (and anything else a user controls) reach log
// lines. A newline, U+0085, U+2028/U+2029 or a control character in a file
// name could forge a log line of its own or hide part of one, and a bidi
// override could make a name read differently from what it is. Those are
// written as escapes (`\n`, `\u0085`, `\u202e`), a backslash as `\\`, so every
// log line is one line and says exactly which bytes were meant.

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\\': '\\\\' };

// C0 and DEL, C1 (U+0085 among them), bidi embeddings/overrides/isolates,
// line and paragraph separators, BOM, and lone surrogates.
const UNSAFE = /[\\\u0000-\u001f\u007f-\u009f\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `text` with every character that could break or disguise a log line escaped. */
export function escapeForLog(text: string): string {
  return text.replace(UNSAFE, (ch) => NAMED[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
