// The control-plane replicas a mount uses (`--server URL1,URL2,…`) and which
// one calls go to: they stick to one until it fails, then move on to the
// next (round robin). Replicas are equal; the order only says where to start.

import { KnowledgeError } from '../../core/errors.js';

/** `--server`: one URL or several separated by commas → their normalised origins+paths; invalid ones named. */
export function parseServerUrls(text: string): string[] {
  const items = text.split(',').map((s) => s.trim());
  if (items.some((s) => s === '')) {
    throw new KnowledgeError('invalid_argument', `--server "${text}": an empty URL in the list (separate several replicas with commas: http://cp-a:7420,http://cp-b:7420)`);
  }
  return items.map((item) => {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new KnowledgeError('invalid_argument', `invalid --server URL "${item}" (example: http://127.0.0.1:7700)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new KnowledgeError('invalid_argument', `--server must be an http:// or https:// URL, not "${item}"`);
    }
    return url.origin + url.pathname.replace(/\/+$/, '');
  });
}

/** The replica list and the one calls go to now. */
export class Replicas {
  readonly urls: readonly string[];
  /** Index of the replica calls go to until it fails. */
  private current = 0;

  constructor(urls: readonly string[]) {
    this.urls = urls;
  }

  get several(): boolean {
    return this.urls.length > 1;
  }

  /** Index of the replica calls go to now. */
  get currentIndex(): number {
    return this.current;
  }

  /** The replica calls go to now. */
  get url(): string {
    return this.urls[this.current] as string;
  }

  /** After a failure of replica `failed`: the next one takes over (unless another call already moved on). */
  moveOn(failed: number): void {
    if (this.current === failed) this.current = (failed + 1) % this.urls.length;
  }
}
