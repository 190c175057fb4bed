import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { gatehouseError } from '../errors.js';

/** The request whose per-user slot a response gives back when it closes (no closure per request on the hot path). */
const SLOT_OWNER = Symbol('gatehouse.slotOwner');
/** ...and the slots it was taken from. */
const SLOTS = Symbol('gatehouse.slots');
type SlotHolder = ServerResponse & { [SLOT_OWNER]?: FastifyRequest; [SLOTS]?: UserSlots };

/**
 * One user may have at most `limits.perUserConcurrency` proxied requests in
 * flight (a refresh they wait for included), so one user's slow or stalled
 * requests cannot take every pooled upstream connection (README "Limits
 * under abuse"; test/proxy/per-user-concurrency.test.ts). The slot is given
 * back when the response closes, finished or not, or once an event
 * stream's head is sent (src/plugins/proxy.ts).
 */
export class UserSlots {
  /** userKey -> proxied requests of that user in flight on this replica. */
  readonly #inFlight = new Map<string, number>();

  /** @param limit `limits.perUserConcurrency`; 0 takes no slot at all. */
  constructor(readonly limit: number) {}

  /** Takes a slot for the request's user (its exchange's userKey); throws the 429 when none is left. */
  take(request: FastifyRequest, reply: FastifyReply): void {
    if (this.limit <= 0) return;
    const exchange = request.exchange!;
    const count = this.#inFlight.get(exchange.userKey) ?? 0;
    if (count >= this.limit) {
      reply.header('retry-after', '1');
      throw gatehouseError('GH_ERR_USER_CONCURRENCY');
    }
    this.#inFlight.set(exchange.userKey, count + 1);
    exchange.holdsSlot = true;
    const holder = reply.raw as SlotHolder;
    holder[SLOT_OWNER] = request;
    holder[SLOTS] = this;
    holder.once('close', onResponseClosed);
  }

  /** Gives the request's slot back, once (a second call does nothing). */
  release(request: FastifyRequest): void {
    const exchange = request.exchange;
    if (exchange === null || !exchange.holdsSlot) return;
    exchange.holdsSlot = false;
    const count = (this.#inFlight.get(exchange.userKey) ?? 1) - 1;
    if (count > 0) this.#inFlight.set(exchange.userKey, count);
    else this.#inFlight.delete(exchange.userKey);
  }
}

/** The response's 'close' listener: one function for every response. */
function onResponseClosed(this: SlotHolder): void {
  const request = this[SLOT_OWNER];
  this[SLOT_OWNER] = undefined;
  if (request) this[SLOTS]!.release(request);
}
