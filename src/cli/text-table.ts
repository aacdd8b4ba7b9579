// Columns for the one-screen text forms (`status`, `explain`): each column as
// wide as its widest cell, two spaces apart, the last one not padded.

/** `rows` as aligned lines; columns listed in `rightAligned` (numbers) are padded on the left. */
export function formatTable(rows: readonly (readonly string[])[], rightAligned: readonly number[] = []): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : rightAligned.includes(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}
