// A reader that goes away (`knowledgefs read F | head -1`, `… --help | true`)
// ends the command quietly, as it ends `ls` or `git`: no stack trace, exit
// status 141 (128 + SIGPIPE, what the shell reports for them; Node ignores
// SIGPIPE itself, so it cannot die of it). A long-running command (mount,
// serve, mcp) that listens for SIGTERM gets SIGTERM instead, so it unmounts
// and closes what it holds on its usual path.

export const BROKEN_PIPE_EXIT = 128 + 13;

export function endQuietlyOnBrokenPipe(streams: readonly NodeJS.WriteStream[] = [process.stdout, process.stderr]): void {
  let stopping = false;
  for (const stream of streams) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      if (stopping) return; // the stop already asked for is under way
      if (process.listenerCount('SIGTERM') > 0) {
        stopping = true;
        process.kill(process.pid, 'SIGTERM');
        return;
      }
      process.exit(BROKEN_PIPE_EXIT);
    });
  }
}
