/**
 * The load of `bench/pool.ts`, in a process of its own: `CLIENTS` clients, each sending the worst
 * indicators request as soon as its last answered. The bench starts it at the lowest CPU priority
 * beside wrk, so that on a machine of two cores the time this process spends receiving megabytes of
 * answers does not delay wrk's own requests and count as the server's latency.
 *
 *   node --import tsx bench/pool-clients.ts <base URL> <clients> <first shift> <honour Retry-After: 0|1>
 *
 * Writes a line per answer (`<status>`), and once stdin closes and every client has its last
 * answer, `shift <next shift>`, then exits.
 */
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const WORST_STUDIES = Array.from({ length: 10 }, (_, i) => `adx:${500 - i}`).join(',');

/** The worst request over the 3 days ending `shift` minutes before a day ago: each shift a window of its own. */
export function worst(base: string, shift: number): string {
  const endMs = Math.floor((Date.now() - DAY_MS) / MINUTE_MS) * MINUTE_MS - shift * MINUTE_MS;
  return `${base}/api/indicators/BTC-USD?interval=1m&start=${new Date(endMs - 3 * DAY_MS).toISOString()}&end=${new Date(endMs).toISOString()}&studies=${WORST_STUDIES}`;
}

async function main(): Promise<void> {
  const [base, clients, firstShift, honour] = process.argv.slice(2);
  if (base === undefined || clients === undefined || firstShift === undefined) throw new Error('usage: pool-clients.ts <base URL> <clients> <first shift> <0|1>');
  let shift = Number(firstShift);
  let running = true;
  process.stdin.on('end', () => (running = false));
  process.stdin.resume();
  await Promise.all(
    Array.from({ length: Number(clients) }, async () => {
      while (running) {
        const res = await fetch(worst(base, shift++));
        await res.arrayBuffer();
        process.stdout.write(`${res.status}\n`);
        const retryAfterS = Number(res.headers.get('retry-after'));
        if (honour === '1' && res.status === 503 && retryAfterS > 0) await new Promise((r) => setTimeout(r, retryAfterS * 1000));
      }
    }),
  );
  process.stdout.write(`shift ${shift}\n`);
}

if (process.argv[1]?.endsWith('pool-clients.ts')) await main();
