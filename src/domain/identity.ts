/**
 * Identities: the one string that names a caller whatever door it came through (`user:<name>` for a
 * user, whichever of its tokens it holds; `key:<id>` for a managed API key; `key:static:<digest
 * prefix>` for a key from API_KEYS). It is a principal's `id`, the quota and audit actor, and the
 * message of the fleet-wide "identity changed" event (`channels.identityChanged`): a key revoked, a
 * user created, deleted or given a new password. Whoever keeps something on the strength of an
 * identity (the bearer check's memory of users, the API-key lookup cache, open streams and sessions)
 * listens for that event and drops or closes what it holds for it.
 */
import type { Principal } from './ports/accounts.js';

/** The identity of the user named `username`: every token of that user carries it. */
export function userIdentity(username: string): string {
  return `user:${username}`;
}

/** The identity of the managed API key whose id is `id`. */
export function apiKeyIdentity(id: string): string {
  return `key:${id}`;
}

/** The identity a principal stands for: its `id`, or one built from its kind and name for callers made without one. */
export function identityOf(principal: Principal): string {
  return principal.id ?? (principal.kind === 'user' ? userIdentity(principal.username) : apiKeyIdentity(principal.username));
}

/** The username an identity names, when it names a user; else `undefined`. */
export function usernameOf(identity: string): string | undefined {
  return identity.startsWith('user:') ? identity.slice('user:'.length) : undefined;
}

/** The managed key id an identity names, when it names a managed API key; else `undefined`. */
export function apiKeyIdOf(identity: string): string | undefined {
  return identity.startsWith('key:') && !identity.startsWith('key:static:') ? identity.slice('key:'.length) : undefined;
}
