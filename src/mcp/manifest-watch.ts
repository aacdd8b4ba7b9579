// Telling a subscribed client that the manifest changed. The daemon pushes
// nothing, so the server asks it for the manifest's sha256 (the daemon answers
// from the control plane): every `intervalMs` while at least one subscription
// is open, and at once when a read has just mounted a team (the change a
// client is most likely to want to hear about). A changed sha256 calls
// `onChange` once per change. With no subscription open nothing is asked.
//
// Checks run one after another, so the sha256 a subscription starts from is
// taken before a later read's mount is compared against it; the server
// confirms a subscription only once that sha256 is in.

export interface ManifestWatchOptions {
  /** The manifest's sha256 as the daemon has it now. */
  readonly sha256: () => Promise<string>;
  readonly intervalMs: number;
  readonly log: (line: string) => void;
}

export class ManifestWatch {
  /** Called when the manifest changed while someone was subscribed. */
  onChange: () => void = () => undefined;
  private readonly subscribers = new Set<string>();
  private last: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private queue: Promise<void> = Promise.resolve();
  private failing = false;

  constructor(private readonly options: ManifestWatchOptions) {}

  get subscribed(): boolean {
    return this.subscribers.size > 0;
  }

  /**
   * A subscription opened (`key` names it: a listen id, or `legacy`).
   * Resolves once the manifest it starts from is known, so that the client,
   * told of the subscription after that, hears of every change it makes next.
   */
  subscribe(key: string): Promise<void> {
    const first = this.subscribers.size === 0;
    this.subscribers.add(key);
    if (!first) return this.queue;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs);
    this.timer.unref();
    return this.enqueue(false);
  }

  unsubscribe(key: string): void {
    if (!this.subscribers.delete(key) || this.subscribers.size > 0) return;
    this.stop();
  }

  /** Compares the manifest with the last one seen; a no-op when nobody subscribes. */
  check(): Promise<void> {
    return this.subscribed ? this.enqueue(true) : Promise.resolve();
  }

  close(): void {
    this.subscribers.clear();
    this.stop();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.last = undefined;
  }

  private enqueue(compare: boolean): Promise<void> {
    this.queue = this.queue.then(() => this.poll(compare));
    return this.queue;
  }

  private async poll(compare: boolean): Promise<void> {
    if (!this.subscribed) return;
    let sha: string;
    try {
      sha = await this.options.sha256();
    } catch (err) {
      // The daemon or control plane is out: say so once, and try again on the next tick.
      if (!this.failing) this.options.log(`manifest not checked for changes: ${err instanceof Error ? err.message : String(err)}`);
      this.failing = true;
      return;
    }
    this.failing = false;
    const before = this.last;
    this.last = sha;
    if (compare && before !== undefined && before !== sha && this.subscribed) this.onChange();
  }
}
