/** What a PostgreSQL (or connection) failure says, for logs and errors: its message, else its class. */
export function pgErrorText(err: unknown): string {
  return err instanceof Error ? err.message || err.constructor.name : String(err);
}
