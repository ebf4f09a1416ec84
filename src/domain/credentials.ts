/**
 * Credentials as the service reads them, whoever reads them: the one reading of an `Authorization`
 * header (the contract's security step and the bearer strategy both go through `readBearer`), and the
 * one set of words a refused caller hears.
 */

/** What rejected credentials are told, one message per reason. */
export const AUTH_MESSAGES = {
  /** A token that does not verify: bad signature, another algorithm, not a JWT, not shaped as issued. */
  invalid: 'Invalid token',
  expired: 'Token has expired',
  /** Its user is gone, or the password it was issued under has changed. */
  revoked: 'Token has been revoked',
  /** The header names the Bearer scheme (or none the bearer check knows) but is not `Bearer <token>`. */
  badAuthorizationHeader: 'Invalid Authorization header: expected "Bearer <token>"',
  /** An operation taking bearer tokens was sent another scheme (Basic, a bare token). */
  notBearer: "Invalid credentials: send the token as 'Authorization: Bearer <token>'",
  /** Empty or unknown alike, so nothing about the configured keys is revealed. */
  invalidApiKey: 'Invalid API key',
  /** A managed key past its `expires_at` (the caller holds the key, so saying so tells them nothing new). */
  apiKeyExpired: 'API key has expired',
  /** A managed key revoked while a stream or session it opened was still open. */
  apiKeyRevoked: 'API key has been revoked',
} as const;

/** An `Authorization` header read for a bearer token. */
export type BearerHeader =
  /** Exactly `Bearer <token>` (RFC 6750: one token after the scheme, the scheme case-insensitive). */
  | { readonly kind: 'token'; readonly token: string }
  /** The Bearer scheme without exactly one token after it (`Bearer`, `Bearer a b`). */
  | { readonly kind: 'malformed' }
  /** Another scheme, or no scheme word at all. */
  | { readonly kind: 'other-scheme' }
  | { readonly kind: 'absent' };

/** The Bearer scheme word, alone or followed by whitespace. */
const BEARER_SCHEME = /^bearer(?:\s|$)/i;
/** `Bearer <token>` and nothing else: one run of non-space characters after the scheme. */
const BEARER_TOKEN = /^bearer\s+(\S+)$/i;
const MALFORMED: BearerHeader = Object.freeze({ kind: 'malformed' });
const OTHER_SCHEME: BearerHeader = Object.freeze({ kind: 'other-scheme' });
const ABSENT: BearerHeader = Object.freeze({ kind: 'absent' });

// The security step and then the bearer check read the same header of the same request: the last
// reading is kept, so the second costs a string comparison instead of two regular expressions.
let lastHeader: string | undefined;
let lastReading: BearerHeader = ABSENT;

/** Reads the value of an `Authorization` header (undefined when the request has none). */
export function readBearer(authorization: string | undefined): BearerHeader {
  if (authorization === undefined) return ABSENT;
  if (authorization === lastHeader) return lastReading;
  let reading: BearerHeader;
  if (!BEARER_SCHEME.test(authorization)) reading = OTHER_SCHEME;
  else {
    const token = BEARER_TOKEN.exec(authorization)?.[1];
    reading = token === undefined ? MALFORMED : { kind: 'token', token };
  }
  lastHeader = authorization;
  lastReading = reading;
  return reading;
}
