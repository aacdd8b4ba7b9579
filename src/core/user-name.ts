// What a user name may be. User names go into URLs (the membership service
// is asked GET <url>/users/<name>/teams) and into logs, so a name must stay
// one path segment whatever decodes it: encodeURIComponent keeps dots, and a
// URL parser resolves ".." and "%2e%2e" as path steps, so creator ".." would
// turn the lookup into GET <url>/teams. Refused: empty, "." and "..", and any
// name containing "/", "\", "%" or a control character. Everything else
// (dots inside, "@", spaces, non-ASCII letters) is a name as directories
// spell them.

/** Why `name` cannot be a user name, or undefined when it can. */
export function userNameProblem(name: string): string | undefined {
  if (name === '') return 'is empty';
  if (name === '.' || name === '..') return 'is a path step ("." or "..")';
  if (name.includes('/') || name.includes('\\')) return 'contains a path separator ("/" or "\\")';
  if (name.includes('%')) return 'contains "%" (no percent-encoding in names)';
  // C0, DEL and C1 controls.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return 'contains a control character';
  return undefined;
}

/** `"<field>" <problem>, got "<name>"`, or undefined when `name` is a valid user name. */
export function userNameError(field: string, name: string): string | undefined {
  const problem = userNameProblem(name);
  return problem === undefined ? undefined : `"${field}" ${problem}, got ${JSON.stringify(name)}: a user name is one path segment, not ".", "..", nor containing "/", "\\", "%" or control characters`;
}
