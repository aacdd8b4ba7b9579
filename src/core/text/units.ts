// Human units for sizes and durations on the command line: `64MiB`, `1.5GB`,
// `500ms`, `2s`, `5m`. A bare number is bytes / milliseconds.

import { KnowledgeError } from '../errors.js';

const SIZE_UNITS: Record<string, number> = {
  '': 1, b: 1,
  k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9, t: 1e12, tb: 1e12,
  kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4,
};

const DURATION_UNITS: Record<string, number> = {
  '': 1, ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000,
};

function parseWithUnits(what: string, text: string, units: Record<string, number>, examples: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const factor = match ? units[(match[2] ?? '').toLowerCase()] : undefined;
  if (!match || factor === undefined) {
    throw new KnowledgeError('invalid_argument', `invalid ${what} "${text}" (examples: ${examples})`);
  }
  return Math.round(Number(match[1]) * factor);
}

/** Bytes from `64MiB`, `10MB`, `4096`. */
export function parseSize(text: string): number {
  return parseWithUnits('size', text, SIZE_UNITS, '4096, 64KiB, 256MiB, 1GB');
}

/** Milliseconds from `500ms`, `2s`, `5m`, `1h`, `30d`, `250`. */
export function parseDuration(text: string): number {
  return parseWithUnits('duration', text, DURATION_UNITS, '0, 500ms, 2s, 5m');
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
  return i === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[i]}`;
}

/** A size as a flag value that parses back to the same number: `256MiB`, `1GiB`, `1500`. */
export function formatSizeFlag(bytes: number): string {
  for (const [unit, factor] of [['TiB', 1024 ** 4], ['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return String(bytes);
}

/** A duration as a flag value that parses back to the same number: `5s`, `2m`, `250ms`, `30d`. */
export function formatDurationFlag(ms: number): string {
  for (const [unit, factor] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= factor && ms % factor === 0) return `${ms / factor}${unit}`;
  }
  return `${ms}ms`;
}
