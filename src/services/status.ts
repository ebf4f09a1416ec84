/** The detailed status of GET /api/admin/status, assembled from each part's own report. */
import type { components } from '../generated/api.js';

type AdminStatus = components['schemas']['AdminStatus'];

export interface StatusSources {
  version: string;
  startedAtMs: number;
  /** The representation cache's own counts. */
  cacheStats: () => Omit<AdminStatus['cache'], 'topology' | 'node'>;
  /** Where the cache lives: the Redis deployment configured and the node in use. */
  cacheLocation: () => Pick<AdminStatus['cache'], 'topology' | 'node'>;
  datasource: () => AdminStatus['datasource'];
  userCount: () => Promise<number>;
  schedulerJobs: () => AdminStatus['scheduler']['jobs'];
  now?: () => number;
}

export class StatusService {
  constructor(private readonly sources: StatusSources) {}

  async report(): Promise<AdminStatus> {
    const s = this.sources;
    const now = s.now ? s.now() : Date.now();
    const { topology, node } = s.cacheLocation();
    return {
      version: s.version,
      uptime_s: Math.max(0, Math.floor((now - s.startedAtMs) / 1000)),
      cache: { ...s.cacheStats(), topology, node },
      datasource: s.datasource(),
      users: { count: await s.userCount() },
      scheduler: { jobs: s.schedulerJobs() },
    };
  }
}
