/**
 * The console's only way to the API: openapi-fetch over the `paths` generated from openapi.yaml, so
 * every call is typed by the contract. Credentials from the session go on every request.
 */
import createClient from 'openapi-fetch';
import type { paths } from '../../src/generated/api.ts';
import { session } from './session.ts';

export const api = createClient<paths>({ baseUrl: globalThis.location?.origin ?? '' });

api.use({
  onRequest({ request }) {
    const { token, apiKey } = session();
    if (token) request.headers.set('Authorization', `Bearer ${token}`);
    else if (apiKey) request.headers.set('X-API-Key', apiKey);
    return request;
  },
});

/** A failed call: the HTTP status (0 when the service could not be reached) and the envelope's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The message of an error envelope (`{success: false, error: '...'}`), else a plain one for the status. */
function envelopeMessage(error: unknown, status: number): string {
  if (typeof error === 'object' && error !== null && typeof (error as { error?: unknown }).error === 'string') return (error as { error: string }).error;
  if (typeof error === 'string' && error.trim().length > 0 && error.length < 300) return error;
  return `The service answered ${status}`;
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The data of a successful call; throws `ApiError` with the envelope's message otherwise. */
export async function call<T>(pending: Promise<Answer<T>>): Promise<T> {
  let answer: Answer<T>;
  try {
    answer = await pending;
  } catch (err) {
    if ((err as { name?: unknown }).name === 'AbortError') throw err;
    throw new ApiError(0, 'The service could not be reached; check that mds is running');
  }
  if (!answer.response.ok || answer.error !== undefined) throw new ApiError(answer.response.status, envelopeMessage(answer.error, answer.response.status));
  return answer.data as T;
}
