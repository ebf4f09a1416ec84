/**
 * The four booleans of GET /api/health, read from the live state of each part. A part that is not
 * wired in answers false: health never claims what it has not checked.
 */
import type { components } from '../generated/api.js';

export type Health = components['schemas']['Health'];

export interface HealthProbes {
  /** The upstream provider answered its last request. */
  datasource?: () => boolean;
  /** The external cache store is in use (answering; not the memory fallback). */
  cache?: () => boolean;
  /** The user database answers and tokens can be signed. */
  auth?: () => Promise<boolean>;
}

export class HealthService {
  constructor(private readonly probes: HealthProbes) {}

  async check(): Promise<Health> {
    const { datasource, cache, auth } = this.probes;
    return {
      ok: true,
      datasource: datasource ? safely(datasource) : false,
      cache: cache ? safely(cache) : false,
      auth: auth ? await auth().catch(() => false) : false,
    };
  }
}

function safely(probe: () => boolean): boolean {
  try {
    return probe() === true;
  } catch {
    return false;
  }
}
