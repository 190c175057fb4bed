import { write, writeSync } from 'node:fs';
import type { DestinationStream } from 'pino';

/** How long a line may wait in the buffer when fewer than BUFFER_BYTES follow it. */
const FLUSH_INTERVAL_MS = 100;
const BUFFER_BYTES = 8 * 1024;
/** What may wait for a reader that does not keep up; later lines are dropped and counted. */
const MAX_PENDING_BYTES = 8 * 1024 * 1024;
/** How long the exit flush retries a non-blocking descriptor that is full (EAGAIN) before giving up. */
const EXIT_RETRY_MS = 1000;
const EAGAIN_PAUSE_MS = 10;

/**
 * The log's way to standard output: lines gathered and written
 * asynchronously in blocks of BUFFER_BYTES and at least every
 * FLUSH_INTERVAL_MS, because one write per access-log line costs a
 * thread-pool round trip each (BENCHMARKS.md "Access log"); what is left is
 * written synchronously when the process exits.
 *
 * A reader that has gone away (EPIPE, or any other write error but a full
 * non-blocking pipe) ends the log, not the gateway: later lines are dropped
 * and nothing is retried. A reader that is slower than the log keeps at most
 * MAX_PENDING_BYTES waiting; the lines beyond are dropped, and their count is
 * written as a warning line once the reader catches up. pino's own destination (sonic-boom) retries a
 * failed synchronous write forever when the process exits, so a gateway
 * whose stdout reader had exited never finished its SIGTERM
 * (test/cli/sigterm-dead-stdout.test.ts).
 */
export class StdoutLog implements DestinationStream {
  private pending: string[] = [];
  private pendingLength = 0;
  private writing = false;
  private broken = false;
  private dropped = 0;
  private flushed: Array<(err?: Error) => void> = [];

  constructor(private readonly fd = 1) {
    setInterval(() => this.flush(), FLUSH_INTERVAL_MS).unref();
    process.on('beforeExit', () => this.flush());
    process.on('exit', () => this.flushSync());
  }

  write(line: string): void {
    if (this.broken) return;
    if (this.pendingLength >= MAX_PENDING_BYTES) {
      this.dropped++;
      return;
    }
    this.pending.push(line);
    this.pendingLength += line.length;
    if (this.pendingLength >= BUFFER_BYTES) this.flush();
  }

  /** Writes what is pending; `done` runs once it is written (or the log has ended). pino's `logger.flush(cb)` calls it. */
  flush(done?: (err?: Error) => void): void {
    if (done !== undefined) this.flushed.push(done);
    if (this.writing) return;
    if (this.broken || this.pending.length === 0) return this.settle();
    this.writing = true;
    this.writeFrom(this.take(), 0);
  }

  /** Writes what is pending now, synchronously: the process is exiting and runs no more callbacks. */
  flushSync(): void {
    if (this.broken || this.pending.length === 0) return;
    // A block still in the thread pool is not written again: it is being written (or already was).
    const block = this.take();
    const deadline = Date.now() + EXIT_RETRY_MS;
    let offset = 0;
    while (offset < block.length) {
      try {
        offset += writeSync(this.fd, block, offset, block.length - offset);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > deadline) return this.end();
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, EAGAIN_PAUSE_MS);
      }
    }
  }

  /** Characters of the lines waiting for the reader. */
  get waiting(): number {
    return this.pendingLength;
  }

  private take(): Buffer {
    if (this.dropped > 0) {
      this.pending.push(droppedLine(this.dropped));
      this.dropped = 0;
    }
    const block = Buffer.from(this.pending.join(''));
    this.pending = [];
    this.pendingLength = 0;
    return block;
  }

  private writeFrom(block: Buffer, offset: number): void {
    write(this.fd, block, offset, block.length - offset, null, (err, written) => {
      if (err !== null) {
        if (err.code === 'EAGAIN') {
          setTimeout(() => this.writeFrom(block, offset), EAGAIN_PAUSE_MS);
          return;
        }
        this.writing = false;
        this.end();
        return this.settle();
      }
      if (offset + written < block.length) return this.writeFrom(block, offset + written);
      this.writing = false;
      if (this.pendingLength >= BUFFER_BYTES || this.flushed.length > 0) this.flush();
      else this.settle();
    });
  }

  /** The reader is gone: nothing more is kept or written. */
  private end(): void {
    this.broken = true;
    this.pending = [];
    this.pendingLength = 0;
  }

  private settle(): void {
    const waiting = this.flushed;
    this.flushed = [];
    for (const done of waiting) done();
  }
}

/** The line that stands for lines the reader was too slow to take, in the log's own shape (pino's warn level). */
function droppedLine(count: number): string {
  return `${JSON.stringify({ level: 40, time: Date.now(), msg: `${count} log lines dropped: standard output did not keep up` })}\n`;
}
