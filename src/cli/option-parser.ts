// Turns a core parser (sizes, durations, counts) into a commander option
// parser, so a bad value becomes one usage line and exit 2.

import { InvalidArgumentError, Option } from 'commander';
import { KnowledgeError } from '../core/errors.js';

/** `on`/`off` (also true/false, yes/no) for switches such as --watch. */
export function parseOnOff(text: string): boolean {
  const v = text.trim().toLowerCase();
  if (v === 'on' || v === 'true' || v === 'yes') return true;
  if (v === 'off' || v === 'false' || v === 'no') return false;
  throw new KnowledgeError('invalid_argument', `expected on or off, not "${text}"`);
}

export function optionParser<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (err) {
      throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
    }
  };
}

/**
 * An option whose value is parsed by a core parser and whose default is
 * shown in --help as a person would type it (`256MiB`, `5s`), not as bytes.
 */
export function parsedOption<T>(flags: string, description: string, parse: (text: string) => T, value: T, shown: string): Option {
  return new Option(flags, description).argParser(optionParser(parse)).default(value, shown);
}
