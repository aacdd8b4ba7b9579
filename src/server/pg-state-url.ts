// The PostgreSQL state URL as logs may show it: never with its password.

/** The URL with its password (if any) removed: what logs and errors may show. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '';
    return u.toString().replace(/^(postgres(?:ql)?:\/\/[^:@/]*):?@/, '$1@');
  } catch {
    return 'postgres://(unparsable URL)';
  }
}
