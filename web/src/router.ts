/** Paths under /app/ mapped to pages, with the History API so links need no reload (and the session stays in memory). */
import { useEffect, useState } from 'preact/hooks';

export type Route = { page: 'markets' } | { page: 'watchlist' } | { page: 'symbol'; symbol: string } | { page: 'admin' } | { page: 'not-found'; path: string };

const SYMBOL = /^[A-Za-z0-9^=-][A-Za-z0-9^.=-]{0,31}$/;

export function routeOf(pathname: string): Route {
  const path = pathname.replace(/\/+$/, '');
  if (path === '/app' || path === '/app/markets') return { page: 'markets' };
  if (path === '/app/watchlist') return { page: 'watchlist' };
  if (path === '/app/admin') return { page: 'admin' };
  const symbol = /^\/app\/symbol\/([^/]+)$/.exec(path)?.[1];
  if (symbol !== undefined) {
    const decoded = decodeURIComponent(symbol);
    if (SYMBOL.test(decoded)) return { page: 'symbol', symbol: decoded.toUpperCase() };
  }
  return { page: 'not-found', path: pathname };
}

export function symbolPath(symbol: string): string {
  return `/app/symbol/${encodeURIComponent(symbol)}`;
}

export function navigate(path: string): void {
  history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}

/** The current route, following links inside the console without a page load. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => routeOf(location.pathname));
  useEffect(() => {
    const onPop = () => setRoute(routeOf(location.pathname));
    const onClick = (event: MouseEvent) => {
      if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      const link = (event.target as Element | null)?.closest?.('a');
      if (!link || link.target || link.hasAttribute('download') || link.origin !== location.origin || !link.pathname.startsWith('/app')) return;
      event.preventDefault();
      navigate(link.pathname + link.search);
    };
    addEventListener('popstate', onPop);
    document.addEventListener('click', onClick);
    return () => {
      removeEventListener('popstate', onPop);
      document.removeEventListener('click', onClick);
    };
  }, []);
  return route;
}
