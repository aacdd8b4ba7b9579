// What a command needs from the outside world, injected so commands can be
// driven in-process by tests as well as from bin/.

export interface CliContext {
  /** Only long-running commands that take input read it (`mcp`); default process.stdin. */
  readonly stdin?: NodeJS.ReadableStream;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Resolves when the command should stop (SIGINT/SIGTERM for long-running commands). */
  readonly stopSignal: () => Promise<string>;
  /** Calls `handler` on each `signal` (e.g. SIGHUP) until the returned function is called. */
  readonly onSignal?: (signal: NodeJS.Signals, handler: () => void) => () => void;
}

/** Each command's action stores its exit code here. */
export interface CommandResult {
  code: number;
}

export function processContext(): CliContext {
  return {
    // A getter: process.stdin builds a stream for fd 0 (~4 ms at a mount's start), and only `mcp` reads it.
    get stdin() {
      return process.stdin;
    },
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    onSignal: (signal, handler) => {
      process.on(signal, handler);
      return () => process.off(signal, handler);
    },
    stopSignal: () =>
      new Promise((resolve) => {
        const onSignal = (signal: string) => {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          resolve(signal);
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
      }),
  };
}
