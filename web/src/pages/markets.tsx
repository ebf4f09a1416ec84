/** The markets board: every market open or closed (with the holiday's name) and a live countdown to its next open or close. */
import { useEffect, useState } from 'preact/hooks';
import { api, call } from '../api.ts';
import { Page, Problem, useApi } from '../ui.tsx';

/** `1d 02:03:04` style, for a countdown. */
export function countdown(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const days = Math.floor(total / 86_400);
  const hms = [Math.floor((total % 86_400) / 3600), Math.floor((total % 3600) / 60), total % 60].map((n) => String(n).padStart(2, '0')).join(':');
  return days > 0 ? `${days}d ${hms}` : hms;
}

const STATE_LABEL: Record<string, string> = { open: 'Open', closed: 'Closed', pre: 'Pre-market', post: 'After hours' };

export function Markets() {
  const markets = useApi((signal) => call(api.GET('/api/markets', { signal })), []);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const { reload } = markets;
  // When a countdown runs out the market changed state: ask again rather than guess.
  const nextChange = markets.data?.data
    .map((m) => Date.parse((m.state === 'open' ? m.next_close : m.next_open) ?? ''))
    .filter((t) => Number.isFinite(t))
    .reduce((a, b) => Math.min(a, b), Infinity);
  const due = nextChange !== undefined && now >= nextChange + 1000;
  useEffect(() => {
    if (due) reload();
  }, [due]);

  return (
    <Page title="Markets">
      {markets.error ? <Problem error={markets.error} onRetry={reload} /> : null}
      {markets.data ? (
        <table class="board" aria-describedby="markets-updated">
          <caption id="markets-updated">Trading state of every market, as of {new Date(markets.data.updated_at).toLocaleTimeString()}</caption>
          <thead>
            <tr>
              <th scope="col">Market</th>
              <th scope="col">State</th>
              <th scope="col">Holiday</th>
              <th scope="col">Next</th>
              <th scope="col">In</th>
            </tr>
          </thead>
          <tbody>
            {markets.data.data.map((m) => {
              const opening = m.state !== 'open';
              const next = opening ? m.next_open : m.next_close;
              return (
                <tr key={m.market} data-market={m.market} data-state={m.state}>
                  <th scope="row">
                    {m.name} <span class="muted">({m.market})</span>
                  </th>
                  <td>
                    <span class={`state state-${m.state}`}>{STATE_LABEL[m.state] ?? m.state}</span>
                  </td>
                  <td class="holiday">{m.holiday ?? ''}</td>
                  <td>{next ? `${opening ? 'Opens' : 'Closes'} ${new Date(next).toLocaleString(undefined, { timeZone: m.timezone, weekday: 'short', hour: '2-digit', minute: '2-digit' })} (${m.timezone})` : 'Never closes'}</td>
                  <td class="countdown" data-target={next ?? ''}>
                    {next ? countdown(Date.parse(next) - now) : '–'}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : markets.loading ? (
        <p class="loading">Loading markets…</p>
      ) : null}
    </Page>
  );
}
