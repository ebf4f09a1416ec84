/**
 * The watchlist: symbols added from a search box with suggestions, each row updated live from the
 * stream (a change flashes), the list remembered in localStorage.
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { components } from '../../../src/generated/api.ts';
import { api, ApiError, call } from '../api.ts';
import { symbolPath } from '../router.ts';
import { onSession } from '../session.ts';
import { followQuotes, type Quote } from '../stream.ts';
import { CurrencySelect, useCurrency } from '../currency.tsx';
import { formatNumber, Page, Problem, signClass } from '../ui.tsx';

type Suggestion = components['schemas']['SearchResult'];

const STORAGE_KEY = 'mds.watchlist';
const SYMBOL = /^[A-Za-z0-9^=-][A-Za-z0-9^.=-]{0,31}$/;
const MAX_SYMBOLS = 50;

function loadList(): string[] {
  try {
    const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? '[]') as unknown;
    return Array.isArray(stored) ? stored.filter((s): s is string => typeof s === 'string' && SYMBOL.test(s)).slice(0, MAX_SYMBOLS) : [];
  } catch {
    return [];
  }
}

function SymbolSearch({ onAdd }: { onAdd: (symbol: string) => void }) {
  const [text, setText] = useState('');
  const [suggestions, setSuggestions] = useState<Suggestion[]>([]);
  const [active, setActive] = useState(-1);
  const [failure, setFailure] = useState<ApiError>();

  useEffect(() => {
    const q = text.trim();
    if (q.length === 0) {
      setSuggestions([]);
      return;
    }
    const controller = new AbortController();
    const timer = setTimeout(() => {
      call(api.GET('/api/search', { params: { query: { q, limit: 8 } }, signal: controller.signal })).then(
        (answer) => {
          setSuggestions(answer.data);
          setActive(-1);
        },
        (err: unknown) => {
          if (!controller.signal.aborted && err instanceof ApiError) setFailure(err);
        },
      );
    }, 150);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [text]);

  const add = (symbol: string) => {
    onAdd(symbol.toUpperCase());
    setText('');
    setSuggestions([]);
    setFailure(undefined);
  };
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === 'ArrowDown' && suggestions.length > 0) {
      event.preventDefault();
      setActive((i) => (i + 1) % suggestions.length);
    } else if (event.key === 'ArrowUp' && suggestions.length > 0) {
      event.preventDefault();
      setActive((i) => (i <= 0 ? suggestions.length - 1 : i - 1));
    } else if (event.key === 'Escape') setSuggestions([]);
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    const picked = suggestions[active]?.symbol;
    if (picked !== undefined) {
      add(picked);
      return;
    }
    // What was typed is a query, not yet a symbol: `appl` means the AAPL the suggestions show, `Apple`
    // the company. An exact symbol wins, then the first suggestion; with none, the symbol must exist.
    const typed = text.trim();
    if (typed.length === 0) return;
    try {
      const found = (await call(api.GET('/api/search', { params: { query: { q: typed, limit: 8 } } }))).data;
      const chosen = found.find((s) => s.symbol.toUpperCase() === typed.toUpperCase()) ?? found[0];
      if (chosen) {
        add(chosen.symbol);
        return;
      }
      if (!SYMBOL.test(typed)) throw new ApiError(404, `No symbol matches '${typed}'`);
      const quote = await call(api.GET('/api/quotes/{symbol}', { params: { path: { symbol: typed } } }));
      add(quote.data.symbol);
    } catch (err) {
      setFailure(err instanceof ApiError ? err : new ApiError(0, String(err)));
    }
  };

  return (
    <form class="search" role="search" onSubmit={submit}>
      <label for="symbol-search">Add a symbol</label>
      <input
        id="symbol-search"
        role="combobox"
        aria-expanded={suggestions.length > 0}
        aria-controls="symbol-suggestions"
        aria-autocomplete="list"
        aria-activedescendant={active >= 0 ? `suggestion-${active}` : undefined}
        autocomplete="off"
        placeholder="AAPL, Apple, ^GSPC…"
        value={text}
        onInput={(e) => {
          setText(e.currentTarget.value);
          setFailure(undefined);
        }}
        onKeyDown={onKeyDown}
      />
      <button type="submit">Add</button>
      <ul id="symbol-suggestions" role="listbox" aria-label="Suggestions" class={suggestions.length > 0 ? 'suggestions' : 'suggestions empty'}>
        {suggestions.map((s, i) => (
          <li key={s.symbol} id={`suggestion-${i}`} role="option" aria-selected={i === active} class={i === active ? 'active' : ''} onMouseDown={(e) => (e.preventDefault(), add(s.symbol))}>
            <strong>{s.symbol}</strong> {s.name} <span class="muted">{s.exchange}</span>
          </li>
        ))}
      </ul>
      {failure ? <Problem error={failure} /> : null}
    </form>
  );
}

function Row({ symbol, quote, unknown, onRemove }: { symbol: string; quote: Quote | undefined; unknown: boolean; onRemove: () => void }) {
  const previous = useRef<number | undefined>(undefined);
  const row = useRef<HTMLTableRowElement>(null);
  // In the same commit as the new price, so the change and its flash are painted together.
  useLayoutEffect(() => {
    const price = quote?.price;
    if (price === undefined) return;
    const before = previous.current;
    previous.current = price;
    if (before === undefined || before === price || !row.current) return;
    // Restart the flash even when the previous one has not finished.
    const element = row.current;
    element.classList.remove('flash-up', 'flash-down');
    void element.offsetWidth;
    element.classList.add(price > before ? 'flash-up' : 'flash-down');
  }, [quote?.price]);
  return (
    <tr ref={row} data-symbol={symbol} data-price={quote?.price ?? ''} data-unknown={unknown ? 'true' : undefined}>
      <th scope="row">
        <a href={symbolPath(symbol)}>{symbol}</a>
      </th>
      <td>{unknown ? <span class="problem-message">Unknown symbol: remove it</span> : (quote?.name ?? '')}</td>
      <td class="num price">{formatNumber(quote?.price)}</td>
      <td class={`num ${signClass(quote?.change)}`}>{formatNumber(quote?.change)}</td>
      <td class={`num ${signClass(quote?.change_percent)}`}>{quote ? `${formatNumber(quote.change_percent)}%` : '–'}</td>
      <td>{quote ? <span class={`state state-${quote.market_state}`}>{quote.market_state}</span> : ''}</td>
      <td>
        <button type="button" aria-label={`Remove ${symbol}`} onClick={onRemove}>
          Remove
        </button>
      </td>
    </tr>
  );
}

/** How often the converted batch is read again while a currency is chosen. */
const CONVERTED_REFRESH_MS = 5000;

/** Reads the batch of `symbols` in `currency` now and every few seconds, until the returned function is called. */
function pollConverted(symbols: readonly string[], currency: string, handlers: { quotes(list: Quote[]): void; missing(symbols: string[]): void; status(state: string, problem?: ApiError): void }): () => void {
  const controller = new AbortController();
  const read = () => {
    call(api.GET('/api/quotes', { params: { query: { symbols: symbols.join(','), currency } }, signal: controller.signal })).then(
      (body) => {
        handlers.quotes(body.data);
        handlers.missing(body.missing ?? []);
        handlers.status('open');
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        handlers.status('error', err instanceof ApiError ? err : new ApiError(0, String(err)));
      },
    );
  };
  handlers.status('connecting');
  read();
  const timer = setInterval(read, CONVERTED_REFRESH_MS);
  return () => {
    clearInterval(timer);
    controller.abort();
  };
}

export function Watchlist() {
  const [symbols, setSymbols] = useState<string[]>(loadList);
  const [quotes, setQuotes] = useState<Record<string, Quote>>({});
  const [missing, setMissing] = useState<string[]>([]);
  const [status, setStatus] = useState<{ state: string; problem?: ApiError }>({ state: 'idle' });
  const [round, setRound] = useState(0);
  useEffect(() => onSession(() => setRound((n) => n + 1)), []);

  useEffect(() => {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(symbols));
  }, [symbols]);

  const [currency, chooseCurrency] = useCurrency();

  useEffect(() => {
    setMissing([]);
    if (symbols.length === 0) {
      setStatus({ state: 'idle' });
      return;
    }
    // The stream sends prices as listed: in another currency the converted batch is read again every few seconds.
    if (currency !== '') return pollConverted(symbols, currency, { quotes: (list) => setQuotes((all) => ({ ...all, ...Object.fromEntries(list.map((q) => [q.symbol, q])) })), missing: setMissing, status: (state, problem) => setStatus({ state, problem }) });
    return followQuotes(symbols, {
      quote: (quote) => setQuotes((all) => ({ ...all, [quote.symbol]: quote })),
      missing: setMissing,
      status: (state, problem) => setStatus({ state, problem }),
    });
  }, [symbols.join(','), round, currency]);

  const add = (symbol: string) => setSymbols((list) => (list.includes(symbol) || list.length >= MAX_SYMBOLS ? list : [...list, symbol]));
  const remove = (symbol: string) => setSymbols((list) => list.filter((s) => s !== symbol));

  return (
    <Page title="Watchlist">
      <SymbolSearch onAdd={add} />
      <CurrencySelect value={currency} onChange={chooseCurrency} />
      <p class="stream-status" aria-live="polite" data-state={status.state}>
        {symbols.length === 0 ? 'Add symbols to follow them live.' : currency === '' ? `Live updates: ${status.state}` : `Prices in ${currency} at live FX rates, read every ${CONVERTED_REFRESH_MS / 1000} s: ${status.state}`}
      </p>
      {status.problem ? <Problem error={status.problem} /> : null}
      {missing.length > 0 ? (
        <p class="problem" role="alert">
          Unknown symbols: {missing.join(', ')}
        </p>
      ) : null}
      {symbols.length > 0 ? (
        <table class="watchlist">
          <caption class="sr-only">Followed symbols</caption>
          <thead>
            <tr>
              <th scope="col">Symbol</th>
              <th scope="col">Name</th>
              <th scope="col" class="num">Price</th>
              <th scope="col" class="num">Change</th>
              <th scope="col" class="num">Change %</th>
              <th scope="col">Market</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {symbols.map((symbol) => (
              <Row key={symbol} symbol={symbol} quote={quotes[symbol]} unknown={missing.includes(symbol)} onRemove={() => remove(symbol)} />
            ))}
          </tbody>
        </table>
      ) : null}
    </Page>
  );
}
