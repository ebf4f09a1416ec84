/**
 * GET /api/ws against clients that stop reading and keep writing (issue 46, defect 2): a socket's
 * refusals and unsent bytes are bounded, so one client cannot grow the process or slow /api/health.
 * Latency bounds: this file runs alone, after the suite (vitest.config.ts `LATENCY_BOUND`).
 */
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { clientFrame, FrameReader, OPCODE, rawUpgrade } from '../helpers/raw-ws.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const provider = new ControlledProvider();

/** Asks /api/health every `everyMs` until stopped; the latencies in ms. */
function healthProbe(svc: TestService, everyMs = 20): { stop(): Promise<number[]> } {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const res = await svc.fetch('/api/health', { signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        latencies.push(performance.now() - started);
      } catch {
        // Not answered: counted as the longest wait there is.
        latencies.push(Number.POSITIVE_INFINITY);
      }
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return latencies;
    },
  };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
};

/**
 * Writes `frames` over and over as fast as the socket takes them (waiting for drain, so the test's
 * own memory stays flat) until the socket fails or `forMs` passes. Resolves with what it saw.
 */
function flood(socket: Socket, frames: Buffer, perChunk: number, forMs: number): Promise<{ frames: number; closedAfterMs: number | undefined }> {
  return new Promise((resolve) => {
    const started = performance.now();
    let written = 0;
    let closedAfterMs: number | undefined;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      resolve({ frames: written, closedAfterMs });
    };
    const closed = () => {
      closedAfterMs ??= performance.now() - started;
      finish();
    };
    socket.on('error', closed);
    socket.on('close', closed);
    const write = () => {
      while (!done && !socket.destroyed) {
        if (performance.now() - started > forMs) {
          finish();
          return;
        }
        written += perChunk;
        if (!socket.write(frames)) {
          socket.once('drain', write);
          return;
        }
      }
    };
    write();
  });
}

describe('GET /api/ws: a client that writes and never reads', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ STREAM_REFRESH_SECONDS: '0', STREAM_MAX_BUFFER_BYTES: String(256 * 1024) }, { provider });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when it floods empty frames, then it is closed within a second, the memory comes back within 30 MB and /api/health keeps its latency', async () => {
    const wsUrl = `${svc.url.replace(/^http/, 'ws')}/api/ws`;
    // Warm the paths the test measures, so their first use is not counted as growth.
    const probe0 = healthProbe(svc);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await probe0.stop();
    const rssBefore = process.memoryUsage().rss;

    const socket = await rawUpgrade(wsUrl);
    await waitFor(() => svc.streams.size === 1, { message: 'the session opened' });
    // Never read: what the server sends piles up on its side. 10,000 empty text frames per write.
    socket.pause();
    const emptyFrames = Buffer.concat(Array.from({ length: 10_000 }, () => clientFrame(OPCODE.text)));
    const probe = healthProbe(svc);
    const started = performance.now();
    let givenBackAfterMs: number | undefined;
    const watch = setInterval(() => {
      if (svc.streams.size === 0) givenBackAfterMs ??= performance.now() - started;
    }, 5);
    const result = await flood(socket, emptyFrames, 10_000, 4000);
    await waitFor(() => svc.streams.size === 0, { timeoutMs: 3000 }).catch(() => undefined);
    clearInterval(watch);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const rssAfterFloodMb = (process.memoryUsage().rss - rssBefore) / 1024 / 1024;
    const latencies = await probe.stop();
    socket.destroy();
    const rssGrowthMb = (process.memoryUsage().rss - rssBefore) / 1024 / 1024;
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    console.log(
      `flood of empty frames: ${result.frames} taken by the client socket (its kernel buffers included); the session given back after ${givenBackAfterMs?.toFixed(0)} ms, the socket dropped after ${result.closedAfterMs?.toFixed(0) ?? 'never (flooded 4 s)'} ms; RSS ${rssAfterFloodMb.toFixed(1)} MB over before 1.5 s after the flood, ${rssGrowthMb.toFixed(1)} MB after the health probe ended; /api/health p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${latencies.length} calls`,
    );
    // On 1b454cb: never closed; ~670,000 frames in 4 s, each answered by a queued 429 error event.
    expect(givenBackAfterMs).toBeDefined();
    expect(givenBackAfterMs!).toBeLessThan(500);
    // Closed (1008) at once, and its socket dropped when it did not answer the close within a second.
    expect(result.closedAfterMs).toBeDefined();
    expect(result.closedAfterMs!).toBeLessThan(2000);
    expect(rssAfterFloodMb).toBeLessThan(30);
    expect(rssGrowthMb).toBeLessThan(30);
    expect(p99).toBeLessThan(250);
  });

  it('when it sends valid actions whose answers it never reads, then it is closed (1013) once its unsent bytes pass STREAM_MAX_BUFFER_BYTES', async () => {
    const wsUrl = `${svc.url.replace(/^http/, 'ws')}/api/ws`;
    const socket = await rawUpgrade(wsUrl);
    await waitFor(() => svc.streams.size === 1, { message: 'the session opened' });
    socket.pause();
    // An unsubscribe of 50 long symbols it does not follow: no work upstream, ~1.9 KB of answer each.
    const symbols = Array.from({ length: 50 }, () => uniqueSymbol('UNREAD-PADDING-PADDING-'));
    const frame = (() => {
      const payload = Buffer.from(JSON.stringify({ action: 'unsubscribe', symbols }));
      // A frame with a 16-bit length (payload > 125 bytes), masked.
      const mask = Buffer.from([1, 2, 3, 4]);
      const head = Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff, ...mask]);
      const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
      return Buffer.concat([head, body]);
    })();
    let sent = 0;
    let closedAt: number | undefined;
    socket.on('error', () => (closedAt ??= sent));
    socket.on('close', () => (closedAt ??= sent));
    // A few at a time, never more than may wait on one connection.
    while (closedAt === undefined && svc.streams.size === 1 && sent < 20_000) {
      for (let i = 0; i < 8; i++) socket.write(frame);
      sent += 8;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const answeredBytes = sent * 1900;
    expect(svc.streams.size).toBe(0);
    // Reading again, it finds the answers that were sent, then the close: 1013, not a queue without end.
    const code = await new Promise<number>((resolve) => {
      const reader = new FrameReader();
      socket.on('data', (chunk: Buffer) => {
        for (const { opcode, payload } of reader.push(chunk)) {
          if (opcode === 0x8) resolve(payload.length >= 2 ? payload.readUInt16BE(0) : 1005);
        }
      });
      socket.on('close', () => resolve(-1));
      socket.resume();
    });
    console.log(`unread answers: closed after ${sent} actions (about ${(answeredBytes / 1024 / 1024).toFixed(1)} MB of answers), close code ${code}`);
    expect(code).toBe(1013);
    socket.destroy();
  });
});
