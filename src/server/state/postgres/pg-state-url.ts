// The PostgreSQL state URL as logs may show it, and what it must not carry on
// a command line. `pg` takes a password from the userinfo and from query
// parameters too (`?password=…`; libpq also knows `sslpassword`), in any case
// the operator spells them: all of those are secrets, and so may be what a
// key or certificate parameter holds.

/** Query parameters whose value is, or may be, a secret (matched case-insensitively). */
const SECRET_PARAM = /pass|secret|token|key|cert/i;

/** The URL with its password and secret query values (if any) removed: what logs may show. Never sent to clients. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '';
    for (const name of [...u.searchParams.keys()]) if (SECRET_PARAM.test(name)) u.searchParams.set(name, 'REDACTED');
    return u.toString().replace(/^(postgres(?:ql)?:\/\/[^:@/]*):?@/, '$1@');
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** Which part of `url` holds a secret ("a password", "the query parameter sslpassword"), or undefined. Throws on an unparsable URL. */
export function secretInUrl(url: string): string | undefined {
  const u = new URL(url);
  if (u.password !== '') return 'a password';
  const name = [...u.searchParams.keys()].find((n) => SECRET_PARAM.test(n));
  return name === undefined ? undefined : `the query parameter ${name}`;
}
