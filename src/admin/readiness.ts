/**
 * Whether the gateway should get traffic: provider metadata loaded, store
 * answered within 5 s, not shutting down (README "Operations"). The
 * shutting-down flag lives here because readiness is what it changes: on
 * SIGTERM /readyz goes false first.
 */
export class Readiness {
  #shuttingDown = false;

  constructor(
    readonly provider: { readonly ready: boolean },
    readonly store: { readonly ready: boolean },
  ) {}

  /** From now on the gateway is not ready, whatever the provider and the store say. */
  shutDown(): void {
    this.#shuttingDown = true;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** The body of /readyz: each check, and whether all of them pass. */
  check(): { ready: boolean; provider: boolean; store: boolean; shuttingDown: boolean } {
    const checks = { provider: this.provider.ready, store: this.store.ready, shuttingDown: this.#shuttingDown };
    return { ready: checks.provider && checks.store && !checks.shuttingDown, ...checks };
  }
}
