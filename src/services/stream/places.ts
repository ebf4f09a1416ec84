/**
 * The places of streams and sessions: how many this instance serves at once, per identified caller
 * and per anonymous address. A stream holds its place from the moment it is asked for (while its first
 * quotes are read) until it closes; a session, from its opening until its end.
 */
import { ServiceBusyError, TooManyRequestsError } from '../../domain/errors.js';
import { identityOf } from '../../domain/identity.js';
import type { StreamCaller } from './contracts.js';

export interface PlaceLimits {
  /** Open streams on this instance at most (STREAM_MAX_CLIENTS). */
  maxClients: number;
  /** Per client address at most (STREAM_MAX_PER_ADDRESS); 0 for no limit. */
  maxPerAddress: number;
  /** Per identified caller at most (STREAM_MAX_PER_CALLER); 0 for no limit. */
  maxPerCaller: number;
}

export class Places {
  readonly #limits: PlaceLimits;
  /** Open and opening streams per holder: `address:<group>` or `caller:<id>`. */
  readonly #perHolder = new Map<string, number>();
  /** Streams counted against the limits, including those still fetching their first quotes. */
  #reserved = 0;

  constructor(limits: PlaceLimits) {
    this.#limits = limits;
  }

  /**
   * Takes a place for `who`; returns whose count it holds a place in. Throws `TooManyRequestsError`
   * over the per-caller or per-address limit, `ServiceBusyError` over the instance's.
   */
  reserve(who: StreamCaller): string | undefined {
    // An identified caller is counted as itself wherever it connects from; an anonymous one by its address.
    const caller = who.principal === undefined ? undefined : identityOf(who.principal);
    const holder = caller !== undefined ? `caller:${caller}` : who.address !== undefined ? `address:${who.address}` : undefined;
    const held = holder === undefined ? 0 : (this.#perHolder.get(holder) ?? 0);
    const limits = this.#limits;
    if (caller !== undefined) {
      if (limits.maxPerCaller > 0 && held >= limits.maxPerCaller) {
        throw new TooManyRequestsError(`Too many open streams for this caller (at most ${limits.maxPerCaller}); close one first`, 30);
      }
    } else if (who.address !== undefined && limits.maxPerAddress > 0 && held >= limits.maxPerAddress) {
      throw new TooManyRequestsError(`Too many open streams from this address (at most ${limits.maxPerAddress}); close one first`, 30);
    }
    if (this.#reserved >= limits.maxClients) {
      throw new ServiceBusyError('This instance serves as many streams as it may; retry later', 30);
    }
    this.#reserved += 1;
    if (holder !== undefined) this.#perHolder.set(holder, held + 1);
    return holder;
  }

  /** Gives back a place `reserve` took for `holder`. */
  release(holder: string | undefined): void {
    this.#reserved -= 1;
    if (holder === undefined) return;
    const left = (this.#perHolder.get(holder) ?? 1) - 1;
    if (left > 0) this.#perHolder.set(holder, left);
    else this.#perHolder.delete(holder);
  }
}
