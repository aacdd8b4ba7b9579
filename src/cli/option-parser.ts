// Turns a core parser (sizes, durations, counts) into a commander option
// parser, so a bad value becomes one usage line and exit 2.

import { InvalidArgumentError } from 'commander';

export function optionParser<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (err) {
      throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
    }
  };
}
