/**
 * The admin page: after a login (the bearer token stays in memory) or with an admin API key, the
 * service's status and cache, the market-data providers, managed API keys, users, usage and data issues.
 */
import { useEffect, useState } from 'preact/hooks';
import type { components } from '../../../src/generated/api.ts';
import { api, ApiError, call } from '../api.ts';
import { onSession, session } from '../session.ts';
import { ChangePassword, formatNumber, Page, Problem, SignIn, useApi } from '../ui.tsx';

type ApiKey = components['schemas']['ApiKey'];
type Provider = components['schemas']['ProviderStatus'];

/** Runs an admin action, showing its failure in the envelope's words. */
function useAction(): [ApiError | undefined, (action: () => Promise<void>) => Promise<void>] {
  const [failure, setFailure] = useState<ApiError>();
  const run = async (action: () => Promise<void>) => {
    setFailure(undefined);
    try {
      await action();
    } catch (err) {
      setFailure(err instanceof ApiError ? err : new ApiError(0, String(err)));
    }
  };
  return [failure, run];
}

function StatusPanel() {
  const status = useApi((signal) => call(api.GET('/api/admin/status', { signal })).then((answer) => answer.data), []);
  const [flushed, setFlushed] = useState<number>();
  const [failure, run] = useAction();
  const flush = () =>
    run(async () => {
      const { data } = await call(api.DELETE('/api/admin/cache'));
      setFlushed(data.removed);
      status.reload();
    });
  const s = status.data;
  return (
    <section aria-labelledby="status-title" class="panel">
      <h2 id="status-title">Service and cache</h2>
      {status.error ? <Problem error={status.error} onRetry={status.reload} /> : null}
      {s ? (
        <dl class="facts" data-panel="cache">
          <dt>Version</dt>
          <dd>{s.version}</dd>
          <dt>Up for</dt>
          <dd>{formatNumber(s.uptime_s)} s</dd>
          <dt>Cache</dt>
          <dd data-cache-mode={s.cache.mode}>
            {s.cache.mode} ({s.cache.topology}, {s.cache.connected ? 'connected' : 'not connected'})
          </dd>
          <dt>Hits / misses</dt>
          <dd>
            {formatNumber(s.cache.hits)} / {formatNumber(s.cache.misses)}
          </dd>
          <dt>Data source</dt>
          <dd>{s.datasource.provider}</dd>
          <dt>Users</dt>
          <dd>{s.users.count}</dd>
        </dl>
      ) : null}
      <button type="button" onClick={flush}>
        Flush the cache
      </button>
      {flushed !== undefined ? <p role="status">Removed {flushed} cached entries.</p> : null}
      {failure ? <Problem error={failure} /> : null}
    </section>
  );
}

const BREAKER_WORDS: Record<Provider['breaker'], string> = { closed: 'closed', open: 'open', half_open: 'half open' };
const BREAKER_CLASS: Record<Provider['breaker'], string> = { closed: 'state-ok', open: 'state-bad', half_open: 'state-warn' };

/** The pool's use today against its limit: the limit is per key, so a pool of n keys has n times it. */
function budgetUse({ budget, keys }: Provider): string {
  if (budget.daily_limit === null) return `${formatNumber(budget.used_today)} (no daily limit)`;
  return `${formatNumber(budget.used_today)} of ${formatNumber(budget.daily_limit * Math.max(1, keys.length))}`;
}

function ProviderKeys({ provider }: { provider: Provider }) {
  if (provider.keys.length === 0) return <span class="muted">none needed</span>;
  return (
    <ul class="key-list">
      {provider.keys.map((key, i) => (
        <li key={`${i} ${key.last4}`} data-key-last4={key.last4} data-key-state={key.state}>
          <span class="sr-only">key ending </span>
          <code>…{key.last4}</code>{' '}
          <span class={`state ${key.state === 'active' ? 'state-ok' : 'state-bad'}`}>{key.state === 'active' ? 'active' : 'set aside'}</span>{' '}
          {formatNumber(key.used_today)}
          {provider.budget.daily_limit === null ? '' : ` of ${formatNumber(provider.budget.daily_limit)}`} today
          {key.set_aside_until ? `, back ${new Date(key.set_aside_until).toLocaleString()}` : ''}
        </li>
      ))}
    </ul>
  );
}

function ProvidersPanel() {
  const providers = useApi((signal) => call(api.GET('/api/admin/providers', { signal })), []);
  const answer = providers.data;
  return (
    <section aria-labelledby="providers-title" class="panel" data-panel="providers">
      <h2 id="providers-title">Providers</h2>
      <button type="button" onClick={providers.reload}>
        Refresh providers
      </button>
      {providers.error ? <Problem error={providers.error} onRetry={providers.reload} /> : null}
      {answer ? (
        <table>
          <caption class="sr-only">Market-data providers, first asked first, as of {new Date(answer.updated_at).toLocaleString()}</caption>
          <thead>
            <tr>
              <th scope="col" class="num">Order</th>
              <th scope="col">Provider</th>
              <th scope="col">Health</th>
              <th scope="col">Breaker</th>
              <th scope="col" class="num">Calls</th>
              <th scope="col" class="num">Failures</th>
              <th scope="col" class="num">Failovers</th>
              <th scope="col" class="num">Used today</th>
              <th scope="col" class="num">Max per second</th>
              <th scope="col">Keys</th>
            </tr>
          </thead>
          <tbody>
            {answer.data.map((p) => (
              <tr key={p.name} data-provider={p.name} data-healthy={String(p.healthy)} data-breaker={p.breaker}>
                <td class="num">{p.position}</td>
                <th scope="row">{p.name}</th>
                <td>
                  <span class={`state ${p.healthy ? 'state-ok' : 'state-bad'}`}>{p.healthy ? 'healthy' : 'unhealthy'}</span>
                  {p.paused_until ? <span class="detail">paused until {new Date(p.paused_until).toLocaleString()}</span> : null}
                  {p.last_error ? <span class="detail muted">last error: {p.last_error}</span> : null}
                </td>
                <td>
                  <span class={`state ${BREAKER_CLASS[p.breaker]}`}>{BREAKER_WORDS[p.breaker]}</span>
                </td>
                <td class="num">{formatNumber(p.calls)}</td>
                <td class="num">{formatNumber(p.failures)}</td>
                <td class="num">{formatNumber(p.failovers)}</td>
                <td class="num">{budgetUse(p)}</td>
                <td class="num">{p.budget.max_rps === null ? 'unlimited' : formatNumber(p.budget.max_rps)}</td>
                <td>
                  <ProviderKeys provider={p} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

function KeysPanel({ keys, reload }: { keys: ApiKey[]; reload: () => void }) {
  const [name, setName] = useState('');
  const [role, setRole] = useState<'read' | 'admin'>('read');
  const [limit, setLimit] = useState('');
  const [created, setCreated] = useState<{ name: string; key: string }>();
  const [failure, run] = useAction();

  const create = (event: Event) => {
    event.preventDefault();
    return run(async () => {
      const perMinute = limit.trim() === '' ? undefined : Number(limit);
      const { data: result } = await call(api.POST('/api/admin/api-keys', { body: { name: name.trim(), role, ...(perMinute === undefined ? {} : { rate_limit_per_minute: perMinute }) } }));
      setCreated({ name: result.name, key: result.key });
      setName('');
      setLimit('');
      reload();
    });
  };
  const revoke = (key: ApiKey) =>
    run(async () => {
      await call(api.DELETE('/api/admin/api-keys/{id}', { params: { path: { id: key.id } } }));
      reload();
    });

  return (
    <section aria-labelledby="keys-title" class="panel" data-panel="keys">
      <h2 id="keys-title">API keys</h2>
      <form onSubmit={create} class="inline-form">
        <label>
          Name
          <input name="key-name" required pattern="[A-Za-z0-9._\-]+" maxLength={64} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Role
          <select name="key-role" value={role} onChange={(e) => setRole(e.currentTarget.value as 'read' | 'admin')}>
            <option value="read">read</option>
            <option value="admin">admin</option>
          </select>
        </label>
        <label>
          Requests per minute (optional)
          <input name="key-limit" type="number" min={0} step={1} value={limit} onInput={(e) => setLimit(e.currentTarget.value)} />
        </label>
        <button type="submit">Create key</button>
      </form>
      {created ? (
        <div class="created-key" role="status">
          <p>
            The key <strong>{created.name}</strong>, shown this once: copy it now.
          </p>
          <p>
            <code class="secret" data-key={created.key}>
              {created.key}
            </code>
          </p>
          <button type="button" onClick={() => setCreated(undefined)}>
            I have copied it
          </button>
        </div>
      ) : null}
      {failure ? <Problem error={failure} /> : null}
      <table>
        <caption class="sr-only">Managed API keys</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Role</th>
            <th scope="col">Per minute</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {keys.map((key) => (
            <tr key={key.id} data-key-id={key.id} data-key-name={key.name}>
              <th scope="row">{key.name}</th>
              <td>{key.role}</td>
              <td>{key.rate_limit_per_minute ?? 'default'}</td>
              <td>{new Date(key.created_at).toLocaleString()}</td>
              <td>{key.last_used_at ? new Date(key.last_used_at).toLocaleString() : 'never'}</td>
              <td>
                <button type="button" aria-label={`Revoke ${key.name}`} onClick={() => revoke(key)}>
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function UsersPanel() {
  const users = useApi((signal) => call(api.GET('/api/admin/users', { signal })).then((answer) => answer.data), []);
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [isAdmin, setIsAdmin] = useState(false);
  const [failure, run] = useAction();
  const create = (event: Event) => {
    event.preventDefault();
    return run(async () => {
      await call(api.POST('/api/admin/users', { body: { username, password, is_admin: isAdmin } }));
      setUsername('');
      setPassword('');
      setIsAdmin(false);
      users.reload();
    });
  };
  const remove = (name: string) =>
    run(async () => {
      await call(api.DELETE('/api/admin/users/{username}', { params: { path: { username: name } } }));
      users.reload();
    });
  return (
    <section aria-labelledby="users-title" class="panel" data-panel="users">
      <h2 id="users-title">Users</h2>
      <form onSubmit={create} class="inline-form">
        <label>
          Username
          <input name="new-username" required autocomplete="off" value={username} onInput={(e) => setUsername(e.currentTarget.value)} />
        </label>
        <label>
          Password
          <input name="new-password" type="password" required autocomplete="new-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        </label>
        <label class="check">
          <input name="new-is-admin" type="checkbox" checked={isAdmin} onChange={(e) => setIsAdmin(e.currentTarget.checked)} />
          Administrator
        </label>
        <button type="submit">Create user</button>
      </form>
      {failure ? <Problem error={failure} /> : null}
      {users.error ? <Problem error={users.error} onRetry={users.reload} /> : null}
      {users.data ? (
        <table>
          <caption class="sr-only">Users</caption>
          <thead>
            <tr>
              <th scope="col">Username</th>
              <th scope="col">Administrator</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {users.data.map((user) => (
              <tr key={user.username} data-username={user.username}>
                <th scope="row">{user.username}</th>
                <td>{user.is_admin ? 'yes' : 'no'}</td>
                <td>{new Date(user.created_at).toLocaleString()}</td>
                <td>
                  <button type="button" aria-label={`Delete ${user.username}`} onClick={() => remove(user.username)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

/** A usage row's caller by name: a managed key by its name (its id only once revoked), a configured key, a user. */
function callerLabel(kind: string, caller: string, names: Map<string, string>): string {
  if (kind !== 'api-key') return `user ${caller}`;
  if (caller === '') return 'a key of API_KEYS';
  const name = names.get(caller);
  return name === undefined ? `revoked key ${caller.slice(0, 8)}` : `key ${name}`;
}

/** What spent a caller's points that day, most first: `rest getQuotes 7 pts (3 req)`. */
function operationsLabel(operations: Array<{ door: string; operation: string; requests: number; points: number }>): string {
  return [...operations]
    .sort((a, b) => b.points - a.points || b.requests - a.requests)
    .map((op) => `${op.door} ${op.operation} ${formatNumber(op.points)} pts (${formatNumber(op.requests)} req)`)
    .join(', ');
}

function UsagePanel({ keys }: { keys: ApiKey[] }) {
  const usage = useApi((signal) => call(api.GET('/api/admin/usage', { params: { query: { days: 30 } }, signal })), []);
  const names = new Map(keys.map((k) => [k.id, k.name]));
  return (
    <section aria-labelledby="usage-title" class="panel" data-panel="usage">
      <h2 id="usage-title">Usage, last 30 days</h2>
      <button type="button" onClick={usage.reload}>
        Refresh usage
      </button>
      {usage.error ? <Problem error={usage.error} onRetry={usage.reload} /> : null}
      {usage.data ? (
        usage.data.data.length === 0 ? (
          <p>No requests by keys or users yet.</p>
        ) : (
          <table>
            <caption class="sr-only">Requests and quota points per API key and per user per day, by door and operation</caption>
            <thead>
              <tr>
                <th scope="col">Day (UTC)</th>
                <th scope="col">Caller</th>
                <th scope="col" class="num">Requests</th>
                <th scope="col" class="num">Points</th>
                <th scope="col" class="num">Refused (429)</th>
                <th scope="col">By door and operation</th>
              </tr>
            </thead>
            <tbody>
              {usage.data.data.map((row) => (
                <tr key={`${row.day} ${row.caller_kind} ${row.caller}`} data-caller={row.caller}>
                  <td>{row.day}</td>
                  <th scope="row">{callerLabel(row.caller_kind, row.caller, names)}</th>
                  <td class="num">{formatNumber(row.requests)}</td>
                  <td class="num">{formatNumber(row.points)}</td>
                  <td class="num">{formatNumber(row.rate_limited)}</td>
                  <td data-field="operations">{operationsLabel(row.operations)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )
      ) : null}
    </section>
  );
}

/** A recorded bar's close, or a dash when the bar is absent (dropped, or nothing was given). */
function closeOf(bar: { close: number } | null | undefined): string {
  return bar ? formatNumber(bar.close) : '\u2014';
}

/** Who gave the bar and who else was consulted; for a divergence, each provider with its close. */
function providersOf(issue: components['schemas']['DataIssue']): string {
  if (issue.closes === undefined) return issue.providers.join(', ');
  return [issue.closes.stored, ...issue.closes.others].map((c) => `${c.provider} ${formatNumber(c.close)}`).join(', ');
}

function DataIssuesPanel() {
  const issues = useApi((signal) => call(api.GET('/api/admin/data-issues', { params: { query: { limit: 100 } }, signal })), []);
  return (
    <section aria-labelledby="data-issues-title" class="panel" data-panel="data-issues">
      <h2 id="data-issues-title">Data issues</h2>
      <p>Bars of upstream answers the quality checks repaired, dropped or suspect, newest first (the last 100).</p>
      <button type="button" onClick={issues.reload}>
        Refresh data issues
      </button>
      {issues.error ? <Problem error={issues.error} onRetry={issues.reload} /> : null}
      {issues.data ? (
        issues.data.data.length === 0 ? (
          <p>No data issues recorded.</p>
        ) : (
          <table>
            <caption class="sr-only">Data issues: symbol, bar, rule, what was done, close before and after, providers (with their closes for a divergence)</caption>
            <thead>
              <tr>
                <th scope="col">Symbol</th>
                <th scope="col">Bar (UTC)</th>
                <th scope="col">Rule</th>
                <th scope="col">Action</th>
                <th scope="col" class="num">Close before</th>
                <th scope="col" class="num">Close after</th>
                <th scope="col">Providers</th>
              </tr>
            </thead>
            <tbody>
              {issues.data.data.map((issue, i) => (
                <tr key={`${issue.recorded_at} ${issue.symbol} ${issue.time} ${issue.rule} ${i}`} data-rule={issue.rule}>
                  <th scope="row">
                    {issue.symbol} {issue.interval}
                  </th>
                  <td>{issue.time.replace('T', ' ').slice(0, 16)}</td>
                  <td>{issue.rule}</td>
                  <td>{issue.action}</td>
                  <td class="num">{closeOf(issue.before)}</td>
                  <td class="num">{closeOf(issue.after)}</td>
                  <td>{providersOf(issue)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )
      ) : null}
    </section>
  );
}

export function Admin() {
  const [, setRound] = useState(0);
  useEffect(() => onSession(() => setRound((n) => n + 1)), []);
  const current = session();
  const signedIn = Boolean(current.token || current.apiKey);
  // Nothing is asked before a sign-in: the answer could only be a 401.
  const keys = useApi((signal) => (signedIn ? call(api.GET('/api/admin/api-keys', { signal })).then((answer) => answer.data) : Promise.resolve([])), [signedIn]);
  if (!signedIn) {
    return (
      <Page title="Admin">
        <SignIn title="Sign in as an administrator" />
      </Page>
    );
  }
  if (keys.error && (keys.error.status === 401 || keys.error.status === 403)) {
    return (
      <Page title="Admin">
        <Problem error={keys.error} />
        {keys.error.status === 403 ? <SignIn title="Sign in as an administrator" /> : null}
      </Page>
    );
  }
  return (
    <Page title="Admin">
      <ChangePassword />
      <StatusPanel />
      <ProvidersPanel />
      {keys.error ? <Problem error={keys.error} onRetry={keys.reload} /> : <KeysPanel keys={keys.data ?? []} reload={keys.reload} />}
      <UsersPanel />
      <UsagePanel keys={keys.data ?? []} />
      <DataIssuesPanel />
    </Page>
  );
}
