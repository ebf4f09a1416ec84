/** Polls `condition` until it holds, failing with `message` after `timeoutMs`. For tests only. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const intervalMs = options.intervalMs ?? 10;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${options.message ?? 'condition'}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
