// A semaphore counted in bytes: work that may hold up to N bytes reserves N
// first and waits while the reservations of others would take the total past
// the budget. Waiters are served in order, so a large reservation is not
// starved by a stream of small ones.

export class ByteBudget {
  private used = 0;
  private readonly waiting: { bytes: number; wake: () => void }[] = [];

  constructor(readonly total: number) {}

  /** Runs `work` holding `bytes` of the budget (at most the whole budget). */
  async with<T>(bytes: number, work: () => Promise<T>): Promise<T> {
    const held = Math.min(bytes, this.total);
    await this.acquire(held);
    try {
      return await work();
    } finally {
      this.used -= held;
      this.wakeWaiters();
    }
  }

  private acquire(bytes: number): Promise<void> {
    if (this.waiting.length === 0 && this.used + bytes <= this.total) {
      this.used += bytes;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ bytes, wake: resolve }));
  }

  private wakeWaiters(): void {
    for (let next = this.waiting[0]; next !== undefined && this.used + next.bytes <= this.total; next = this.waiting[0]) {
      this.waiting.shift();
      this.used += next.bytes;
      next.wake();
    }
  }
}
