import type { HealthService } from '../../services/health.js';
import type { Handler, JsonResponse } from './types.js';

export function healthHandlers(health: HealthService): { getHealth: Handler<'getHealth'> } {
  return {
    async getHealth(_req, res) {
      const body: JsonResponse<'getHealth', 200> = await health.check();
      res.status(200).json(body);
    },
  };
}
