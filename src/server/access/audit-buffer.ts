// The bounded buffer between the request path and a slow sink (stdout, or
// PostgreSQL). `push` never waits: a decision is handed over and the request
// goes on. At most `max` decisions are held; when a new one arrives at a
// full buffer the OLDEST is dropped and counted (knowledgefs_audit_dropped_total),
// as OPA's decision-log buffer does: after an outage the log holds the most
// recent decisions, which are the ones an operator asks about, and the gap is
// one stretch at the start of the outage that the metric measures.
//
// `Outage` turns many failures into two log lines: one when writes start
// failing, one when they work again (with how many were dropped meanwhile).

export class AuditBuffer<T> {
  private items: T[] = [];
  private head = 0;

  constructor(
    readonly max: number,
    private readonly onDrop: (count: number) => void,
  ) {}

  get size(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
    this.trim();
  }

  /** Up to `n` of the oldest held items, removed from the buffer. */
  take(n: number): T[] {
    const batch = this.items.slice(this.head, this.head + n);
    this.head += batch.length;
    // Compact now and then, so the array does not grow with every push ever made.
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator,ArithmeticOperator,BlockStatement: compacting more or less often changes only memory, never which items are held or their order
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return batch;
  }

  /** A batch that could not be written goes back in front; what no longer fits is dropped, oldest first. */
  putBack(batch: readonly T[]): void {
    this.items = [...batch, ...this.items.slice(this.head)];
    this.head = 0;
    this.trim();
  }

  private trim(): void {
    const over = this.size - this.max;
    if (over <= 0) return;
    this.head += over;
    this.onDrop(over);
  }
}

/** One log line when a sink starts failing and one when it works again, whatever happens between. */
export class Outage {
  private failing = false;
  private droppedSince = 0;

  constructor(
    private readonly what: string,
    private readonly log: (line: string) => void,
    private readonly bound: string,
  ) {}

  get down(): boolean {
    return this.failing;
  }

  dropped(count: number): void {
    this.droppedSince += count;
  }

  failed(reason: string): void {
    if (this.failing) return;
    this.failing = true;
    this.droppedSince = 0;
    this.log(`audit log: ${this.what} failing (${reason}); ${this.bound}, beyond that the oldest are dropped and counted in knowledgefs_audit_dropped_total`);
  }

  worked(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log(`audit log: ${this.what} working again; ${this.droppedSince} decisions were dropped meanwhile`);
  }
}
