import { Page } from '../ui.tsx';

/** The console's own answer for a path under /app/ it has no page for. */
export function NotFound({ path }: { path: string }) {
  return (
    <Page title="Page not found">
      <div class="not-found" data-view="not-found">
        <p>
          The console has no page at <code>{path}</code>.
        </p>
        <p>
          Go to the <a href="/app/">markets board</a>, the <a href="/app/watchlist">watchlist</a> or the <a href="/app/admin">admin page</a>.
        </p>
      </div>
    </Page>
  );
}
