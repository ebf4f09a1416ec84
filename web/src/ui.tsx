/** Pieces every page shares: loading data through the typed client, and showing why a call failed. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, ApiError, call } from './api.ts';
import { onSession, session, setSession } from './session.ts';

export interface Loaded<T> {
  data?: T;
  error?: ApiError;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` now, again when `deps` or the session change, and on `reload`. */
export function useApi<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => onSession(() => setRound((n) => n + 1)), []);
  useEffect(() => {
    const controller = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    load(controller.signal).then(
      (data) => !controller.signal.aborted && setState({ data, loading: false }),
      (err: unknown) => {
        if (controller.signal.aborted) return;
        setState({ error: err instanceof ApiError ? err : new ApiError(0, err instanceof Error ? err.message : String(err)), loading: false });
      },
    );
    return () => controller.abort();
  }, [...deps, round]);
  const reload = useCallback(() => setRound((n) => n + 1), []);
  return { ...state, reload };
}

/** Why a call failed, in the envelope's words; a 401 also offers to sign in. */
export function Problem({ error, onRetry }: { error: ApiError; onRetry?: () => void }) {
  return (
    <div class="problem" role="alert">
      <p>
        <strong>{error.status === 0 ? 'Unreachable' : `Error ${error.status}`}:</strong> <span class="problem-message">{error.message}</span>
      </p>
      {error.status === 401 ? <SignIn /> : onRetry ? <button type="button" onClick={onRetry}>Try again</button> : null}
    </div>
  );
}

/** Sign in with a username and password (a bearer token, kept in memory), or with an API key. */
export function SignIn({ title = 'Sign in to continue' }: { title?: string }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [apiKey, setApiKey] = useState('');
  const [failure, setFailure] = useState<string>();
  const [busy, setBusy] = useState(false);

  const login = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setFailure(undefined);
    try {
      const result = await call(api.POST('/api/auth/login', { body: { username, password } }));
      setPassword('');
      setSession({ token: result.access_token, username: result.username, isAdmin: result.is_admin, mustChangePassword: result.must_change_password });
    } catch (err) {
      setFailure(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const useKey = (event: Event) => {
    event.preventDefault();
    if (apiKey.trim()) setSession({ apiKey: apiKey.trim() });
  };

  return (
    <section class="sign-in" aria-labelledby="sign-in-title">
      <h2 id="sign-in-title">{title}</h2>
      <form onSubmit={login} class="stack">
        <label>
          Username
          <input name="username" autocomplete="username" required value={username} onInput={(e) => setUsername(e.currentTarget.value)} />
        </label>
        <label>
          Password
          <input name="password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <form onSubmit={useKey} class="stack">
        <label>
          Or an API key
          <input name="api-key" type="password" autocomplete="off" value={apiKey} onInput={(e) => setApiKey(e.currentTarget.value)} />
        </label>
        <button type="submit">Use this key</button>
      </form>
      {failure ? (
        <p class="problem" role="alert">
          {failure}
        </p>
      ) : null}
    </section>
  );
}

/**
 * A new password for the signed-in user (a bearer session: an API key has no password). The answer's
 * fresh token replaces the old one, which the change revoked.
 */
export function ChangePassword() {
  const [oldPassword, setOldPassword] = useState('');
  const [newPassword, setNewPassword] = useState('');
  const [outcome, setOutcome] = useState<{ ok: boolean; message: string }>();
  const [busy, setBusy] = useState(false);
  const current = session();
  if (!current.token) return null;

  const change = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setOutcome(undefined);
    try {
      const { data: result } = await call(api.POST('/api/auth/change-password', { body: { old_password: oldPassword, new_password: newPassword } }));
      setOldPassword('');
      setNewPassword('');
      setSession({ token: result.access_token, username: result.username, isAdmin: result.is_admin, mustChangePassword: result.must_change_password });
      setOutcome({ ok: true, message: 'Password changed.' });
    } catch (err) {
      setOutcome({ ok: false, message: err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="panel" aria-labelledby="password-title" data-panel="password">
      <h2 id="password-title">Change your password</h2>
      {current.mustChangePassword ? (
        <p class="problem" role="alert" data-must-change>
          You are signed in with the shipped default password: choose a new one now.
        </p>
      ) : null}
      <form onSubmit={change} class="stack">
        <label>
          Current password
          <input name="current-password" type="password" autocomplete="current-password" required value={oldPassword} onInput={(e) => setOldPassword(e.currentTarget.value)} />
        </label>
        <label>
          New password (8 to 72 bytes)
          <input name="own-new-password" type="password" autocomplete="new-password" required minLength={8} value={newPassword} onInput={(e) => setNewPassword(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Change password
        </button>
      </form>
      {outcome ? (
        <p class={outcome.ok ? 'notice' : 'problem'} role={outcome.ok ? 'status' : 'alert'}>
          {outcome.message}
        </p>
      ) : null}
    </section>
  );
}

/** Who the console is signed in as, with a way out. */
export function SessionBadge() {
  const [, setRound] = useState(0);
  useEffect(() => onSession(() => setRound((n) => n + 1)), []);
  const current = session();
  if (!current.token && !current.apiKey) return null;
  return (
    <span class="session">
      {current.username ? `Signed in as ${current.username}` : 'Using an API key'}{' '}
      <button type="button" onClick={() => setSession({})}>
        Sign out
      </button>
    </span>
  );
}

export function Page({ title, children }: { title: string; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · mds console`;
  }, [title]);
  return (
    <>
      <h1>{title}</h1>
      {children}
    </>
  );
}

const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
export function formatNumber(value: number | null | undefined): string {
  return value === null || value === undefined ? '–' : number.format(value);
}

export function signClass(value: number | null | undefined): string {
  return value === null || value === undefined || value === 0 ? '' : value > 0 ? 'up' : 'down';
}
