/**
 * Who the console calls the API as. Held in memory only (never localStorage or a cookie): a reload
 * or a closed tab forgets it, so a token cannot outlive the page that asked for it.
 */
export interface Session {
  /** A bearer token from a login. */
  token?: string;
  /** An API key typed in instead of a login. */
  apiKey?: string;
  username?: string;
  isAdmin?: boolean;
  /** The login said the password is still the shipped default: the console asks for a new one. */
  mustChangePassword?: boolean;
}

let current: Session = {};
const listeners = new Set<() => void>();

export function session(): Session {
  return current;
}

export function setSession(next: Session): void {
  current = next;
  for (const listener of listeners) listener();
}

/** Calls `listener` after every change; returns the function that stops it. */
export function onSession(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
