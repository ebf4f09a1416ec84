/**
 * Another process's memory, seen from outside: its V8 inspector (a process started with
 * `--inspect=127.0.0.1:0`) for a full collection and the heap's size, and /proc for its RSS. The
 * process under test needs no hook of its own for either.
 */
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

export interface Inspector {
  /** A full, compacting collection (`HeapProfiler.collectGarbage`); resolves once it is done. */
  collectGarbage(): Promise<void>;
  /** Bytes of the JS heap in use (`Runtime.getHeapUsage`). */
  heapUsed(): Promise<number>;
  /** The pid of the process this session inspects (`process.pid`, evaluated there). */
  pid(): Promise<number>;
  close(): void;
}

/** `ws://...` from node's `Debugger listening on ws://...` line in `stderr`; throws when there is none. */
export function inspectorUrl(stderr: string): string {
  const m = /Debugger listening on (ws:\/\/\S+)/.exec(stderr);
  if (!m?.[1]) throw new Error(`no inspector in the process's stderr: ${stderr}`);
  return m[1];
}

/** Opens one inspector session on `url`; each call waits for its own answer (by id), or rejects after `timeoutMs`. */
export async function openInspector(url: string, timeoutMs = 30_000): Promise<Inspector> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (result: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  ws.on('message', (data: Buffer) => {
    const message = JSON.parse(data.toString('utf8')) as { id?: number; result?: Record<string, unknown>; error?: { message: string } };
    const waiting = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiting) return; // an event, not an answer
    pending.delete(message.id!);
    if (message.error) waiting.reject(new Error(`inspector: ${message.error.message}`));
    else waiting.resolve(message.result ?? {});
  });
  ws.on('close', () => {
    for (const waiting of pending.values()) waiting.reject(new Error('inspector closed'));
    pending.clear();
  });
  const call = (method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`inspector: no answer to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, {
        resolve: (r) => (clearTimeout(timer), resolve(r)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  return {
    async collectGarbage() {
      await call('HeapProfiler.collectGarbage');
    },
    async heapUsed() {
      const { usedSize } = await call('Runtime.getHeapUsage');
      if (typeof usedSize !== 'number') throw new Error(`inspector: Runtime.getHeapUsage gave no usedSize`);
      return usedSize;
    },
    async pid() {
      const { result } = (await call('Runtime.evaluate', { expression: 'process.pid', returnByValue: true })) as { result?: { value?: unknown } };
      if (typeof result?.value !== 'number') throw new Error('inspector: process.pid gave no number');
      return result.value;
    },
    close: () => ws.close(),
  };
}

/** Resident set size of process `pid` in bytes (VmRSS in /proc/<pid>/status; Linux). */
export function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m?.[1]) throw new Error(`no VmRSS for process ${pid}`);
  return Number(m[1]) * 1024;
}
