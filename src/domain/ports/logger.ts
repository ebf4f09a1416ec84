/**
 * The logger port: the structured logger (pino) every part writes to.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { Logger } from 'pino';

/** The structured logger (pino) every part writes to; built once in `infra/logger.ts`. */
export type { Logger };
