import type { Clock } from '../../src/clock.js';

/**
 * A clock a test moves forward instead of sleeping: real time plus whatever
 * `advance` added, so that everything else (the AS, the store's own expiry)
 * keeps running as usual.
 */
export class TestClock implements Clock {
  #offset = 0;

  now(): number {
    return Date.now() + this.#offset;
  }

  advance(ms: number): void {
    this.#offset += ms;
  }
}
