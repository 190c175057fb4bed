/** What tells the gateway the time where time decides an outcome (idle timeout, token expiry). Tests pass one they can move. */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
