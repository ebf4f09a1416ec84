/** The console's shell: navigation, and the page of the current route (chart and admin pages load on demand). */
import './styles.css';
import type { ComponentType } from 'preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Markets } from './pages/markets.tsx';
import { NotFound } from './pages/not-found.tsx';
import { Watchlist } from './pages/watchlist.tsx';
import { useRoute, type Route } from './router.ts';
import { SessionBadge } from './ui.tsx';

/** A page in its own chunk, so the markets board does not carry the chart library. */
function lazyPage<P extends object>(load: () => Promise<ComponentType<P>>): ComponentType<P> {
  let loaded: ComponentType<P> | undefined;
  return function Lazy(props: P) {
    const [Component, setComponent] = useState<ComponentType<P> | undefined>(() => loaded);
    const [failure, setFailure] = useState<string>();
    useEffect(() => {
      if (loaded) return;
      load().then(
        (component) => {
          loaded = component;
          setComponent(() => component);
        },
        (err: unknown) => setFailure(err instanceof Error ? err.message : String(err)),
      );
    }, []);
    if (failure) return <p role="alert" class="problem">This page could not be loaded: {failure}</p>;
    return Component ? <Component {...props} /> : <p class="loading">Loading…</p>;
  };
}

const SymbolPage = lazyPage(() => import('./pages/symbol.tsx').then((m) => m.SymbolPage));
const Admin = lazyPage(() => import('./pages/admin.tsx').then((m) => m.Admin));

function Content({ route }: { route: Route }) {
  switch (route.page) {
    case 'markets':
      return <Markets />;
    case 'watchlist':
      return <Watchlist />;
    case 'symbol':
      return <SymbolPage symbol={route.symbol} />;
    case 'admin':
      return <Admin />;
    default:
      return <NotFound path={route.path} />;
  }
}

function App() {
  const route = useRoute();
  const current = (page: Route['page']) => (route.page === page ? 'page' : undefined);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/app/">
          mds
        </a>
        <nav aria-label="Console">
          <a href="/app/" aria-current={current('markets')}>
            Markets
          </a>
          <a href="/app/watchlist" aria-current={current('watchlist')}>
            Watchlist
          </a>
          <a href="/app/admin" aria-current={current('admin')}>
            Admin
          </a>
          <a href="/docs">API docs</a>
        </nav>
        <SessionBadge />
      </header>
      <main id="main" tabIndex={-1}>
        <Content route={route} />
      </main>
    </>
  );
}

const root = document.getElementById('root')!;
// The boot message is for a browser that never runs this script; Preact renders beside existing children.
root.replaceChildren();
render(<App />, root);
